// Command products shows the subset pattern: each product embeds its three
// newest reviews and the count of all its reviews, so a product page ("3
// of 5 reviews") is one read, while every review lives in the reviews
// collection, paginated from there.
//
//	go -C examples run ./products
//
// It uses MONGODB_URI when set, and otherwise starts the embedded dev
// server (FerretDB), where the repository takes its portable path.
package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// Review is one review, stored in the reviews collection; the newest three
// of a product are also embedded in it.
type Review struct {
	ID        bson.ObjectID `bson:"_id"`
	ProductID string        `bson:"productId,omitempty"`
	Author    string        `bson:"author"`
	Stars     int           `bson:"stars"`
	Text      string        `bson:"text"`
	At        time.Time     `bson:"at"`
}

// Product is what a product page shows.
type Product struct {
	ID          string   `bson:"_id"`
	Name        string   `bson:"name"`
	Reviews     []Review `bson:"reviews,omitempty"`
	ReviewCount int64    `bson:"reviewCount"` // all its reviews, kept with the subset
}

func main() { demo.Run("example_products", run) }

func run(ctx context.Context, db *mongo.Database) error {
	reviews, err := subset.New[Product, Review](db, subset.Config{
		Parents: "products", Field: "reviews",
		Items: "reviews", ParentField: "productId",
		SortField: "at", Descending: true, // the newest first
		Cap:        3,
		CountField: "reviewCount", // "3 of 5 reviews", in the same read
	})
	if err != nil {
		return err
	}
	if err := patterns.EnsureIndexes(ctx, reviews.Indexes()...); err != nil {
		return err
	}
	if _, err := db.Collection("products").InsertMany(ctx, []Product{{ID: "kettle", Name: "Steel kettle"}, {ID: "toaster", Name: "Toaster"}}); err != nil {
		return err
	}

	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	review := func(author string, stars, day int, text string) Review {
		return Review{ID: bson.NewObjectID(), Author: author, Stars: stars, Text: text, At: start.AddDate(0, 0, day)}
	}
	batch := []Review{
		review("ann", 5, 4, "Boils fast."),
		review("bob", 3, 1, "Loud."),
		review("cy", 4, 6, "Handle stays cool."),
	}
	late := []Review{review("dee", 2, 2, "Lid sticks."), review("eve", 5, 8, "Best kettle so far.")}
	if err := reviews.Add(ctx, "kettle", batch...); err != nil {
		return err
	}
	if err := reviews.Add(ctx, "kettle", late...); err != nil { // out of order: days 2 and 8
		return err
	}
	if err := reviews.Add(ctx, "toaster", review("fay", 4, 3, "Even browning.")); err != nil {
		return err
	}
	if err := show(ctx, reviews, "5 reviews added, out of order"); err != nil {
		return err
	}

	// A client that lost the acknowledgement retries: nothing is stored twice.
	if err := reviews.Add(ctx, "kettle", late...); err != nil {
		return err
	}
	n, err := reviews.Count(ctx, "kettle") // the product's count field: one read
	if err != nil {
		return err
	}
	fmt.Printf("after a retried Add: %d kettle reviews stored\n", n)

	// One review by its id, for its own page.
	one, err := reviews.Item(ctx, "kettle", batch[1].ID)
	if err != nil {
		return err
	}
	fmt.Printf("review %s: %s, %d stars: %q\n", one.ID.Hex()[:6]+"...", one.Author, one.Stars, one.Text)

	// The newest review is withdrawn: the next newest takes its place.
	if err := reviews.Remove(ctx, "kettle", late[1].ID); err != nil {
		return err
	}
	edited := batch[0]
	edited.Text = "Boils fast; a year on, still does."
	if err := reviews.Update(ctx, "kettle", edited); err != nil {
		return err
	}
	if err := show(ctx, reviews, "eve's review removed, ann's edited"); err != nil {
		return err
	}

	// Every review, two per page, as an API would serve them.
	var after subset.Cursor
	for page := 1; ; page++ {
		items, next, err := reviews.Page(ctx, "kettle", after, 2)
		if err != nil {
			return err
		}
		var who []string
		for _, r := range items {
			who = append(who, fmt.Sprintf("%s (%s)", r.Author, r.At.Format("Jan 2")))
		}
		fmt.Printf("page %d: %s; next cursor %q\n", page, strings.Join(who, ", "), next)
		if next.IsZero() {
			break
		}
		after = next
	}

	// A new cap, or a repair: recompute every product's subset.
	rebuilt, err := reviews.RebuildAll(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("rebuilt the subsets of %d products\n", rebuilt)
	return nil
}

// show prints the product page of the kettle: one read.
func show(ctx context.Context, reviews subset.Store[Product, Review], when string) error {
	p, err := reviews.Get(ctx, "kettle")
	if err != nil {
		return err
	}
	fmt.Printf("%s; %s shows %d of %d reviews:\n", when, p.Name, len(p.Reviews), p.ReviewCount)
	for _, r := range p.Reviews {
		fmt.Printf("  %s  %s  %d stars  %s\n", r.At.Format("Jan 2"), r.Author, r.Stars, r.Text)
	}
	return nil
}
