package subset_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// Review is one review of a product, stored in the reviews collection;
// the two newest are also embedded in the product.
type Review struct {
	ID        string    `bson:"_id"`
	ProductID string    `bson:"productId,omitempty"`
	Stars     int       `bson:"stars"`
	At        time.Time `bson:"at"`
}

// Product embeds its newest reviews.
type Product struct {
	ID      string   `bson:"_id"`
	Name    string   `bson:"name"`
	Reviews []Review `bson:"reviews,omitempty"`
}

func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_subset")
	defer db.Drop(ctx)

	reviews, err := subset.New[Product, Review](db, subset.Config{
		Parents: "products", Field: "reviews",
		Items: "reviews", ParentField: "productId",
		SortField: "at", Descending: true, // newest first
		Cap: 2,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := patterns.EnsureIndexes(ctx, reviews.Indexes()...); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Collection("products").InsertOne(ctx, Product{ID: "kettle", Name: "Kettle"}); err != nil {
		log.Fatal(err)
	}

	day := func(d int) time.Time { return time.Date(2026, 3, d, 12, 0, 0, 0, time.UTC) }
	show := func(when string) {
		p, err := reviews.Get(ctx, "kettle") // one round trip
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s:", when)
		for _, r := range p.Reviews {
			fmt.Printf(" %s (%d stars, March %d)", r.ID, r.Stars, r.At.Day())
		}
		fmt.Println()
	}
	err = reviews.Add(ctx, "kettle",
		Review{ID: "r1", Stars: 4, At: day(1)},
		Review{ID: "r3", Stars: 5, At: day(3)})
	if err != nil {
		log.Fatal(err)
	}
	// A review that arrives late takes its place by date: r1 leaves the
	// product, and stays in the reviews collection.
	if err := reviews.Add(ctx, "kettle", Review{ID: "r2", Stars: 2, At: day(2)}); err != nil {
		log.Fatal(err)
	}
	show("after three reviews")

	// Removing a review of the subset brings in the next newest.
	if err := reviews.Remove(ctx, "kettle", "r3"); err != nil {
		log.Fatal(err)
	}
	show("after removing r3")

	// The full set, one page at a time.
	var after subset.Cursor
	for page := 1; ; page++ {
		items, next, err := reviews.Page(ctx, "kettle", after, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("page %d: %s\n", page, items[0].ID)
		if next.IsZero() {
			break
		}
		after = next
	}
	// Output:
	// after three reviews: r3 (5 stars, March 3) r2 (2 stars, March 2)
	// after removing r3: r2 (2 stars, March 2) r1 (4 stars, March 1)
	// page 1: r2
	// page 2: r1
}
