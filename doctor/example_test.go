package doctor_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/doctor"
)

func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_doctor")
	defer db.Drop(ctx)

	// A product whose reviews grew without bound, and an index that is a
	// prefix of another.
	reviews := bson.A{}
	for i := range 1500 {
		reviews = append(reviews, bson.D{{Key: "stars", Value: 1 + i%5}})
	}
	if _, err := db.Collection("products").InsertOne(ctx, bson.D{{Key: "name", Value: "kettle"}, {Key: "reviews", Value: reviews}}); err != nil {
		log.Fatal(err)
	}
	orders := db.Collection("orders")
	for _, key := range []bson.D{
		{{Key: "customerId", Value: 1}},
		{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: -1}},
	} {
		if _, err := orders.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: key}); err != nil {
			log.Fatal(err)
		}
	}

	rep, err := doctor.Check(ctx, db, doctor.Options{
		// A query shape the application sends: the check says which index
		// serves it, in Equality, Sort, Range order.
		Queries: []doctor.Query{{
			Collection: "orders",
			Filter:     bson.D{{Key: "status", Value: "paid"}},
			Sort:       bson.D{{Key: "createdAt", Value: -1}},
			Name:       "paid orders, newest first",
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range rep.Findings {
		fmt.Println(f.Severity, f.Rule, f.Collection, cmp.Or(f.Index, f.Field))
		fmt.Println("  ", f.Remedy)
	}
	// Output:
	// warning redundant-index orders customerId_1
	//    drop index customerId_1: customerId_1_createdAt_-1 serves every query it serves, and each write updates both
	// warning unindexed-query orders status, createdAt
	//    create index {status: 1, createdAt: -1} (Equality, Sort, Range order; patterns.ESRKey builds such keys)
	// warning unbounded-array products reviews
	//    keep the N most relevant elements embedded and the full list in its own collection: the subset pattern (package subset)
}
