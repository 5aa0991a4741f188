package outlier_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/outlier"
	"github.com/mongopatterns/mongopatterns/patterns"
)

type Post struct {
	ID    int    `bson:"_id"`
	Title string `bson:"title"`
}

type Comment struct {
	ID   int    `bson:"_id"`
	Text string `bson:"text"`
}

// A post embeds its first 3 comments; the others overflow, 2 per
// document, and the merged read puts them back in order.
func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_outlier")
	defer db.Drop(ctx)

	posts, err := outlier.New[Post, Comment](db, outlier.Config{
		Parents: "posts", Field: "comments", Cap: 3, OverflowCap: 2,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := patterns.EnsureIndexes(ctx, posts.Indexes()...); err != nil {
		log.Fatal(err)
	}
	if _, err := posts.Insert(ctx, Post{ID: 1, Title: "Hello"}); err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if err := posts.Append(ctx, 1, Comment{ID: i, Text: fmt.Sprint("comment ", i)}); err != nil {
			log.Fatal(err)
		}
	}

	post, comments, err := posts.Get(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d comments, the last %q\n", post.Title, len(comments), comments[5].Text)

	var stored struct {
		Comments []Comment `bson:"comments"`
		HasExtra bool      `bson:"has_extra"`
	}
	if err := db.Collection("posts").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&stored); err != nil {
		log.Fatal(err)
	}
	overflow, err := db.Collection("posts_overflow").CountDocuments(ctx, bson.D{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("embedded %d, has_extra %v, overflow documents %d\n", len(stored.Comments), stored.HasExtra, overflow)

	if err := posts.Remove(ctx, 1, 4); err != nil {
		log.Fatal(err)
	}
	for c, err := range posts.Items(ctx, 1) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(c.ID, " ")
	}
	n, err := posts.Count(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("(%d)\n", n)
	// Output:
	// Hello: 6 comments, the last "comment 6"
	// embedded 3, has_extra true, overflow documents 2
	// 1 2 3 5 6 (5)
}
