package extref_test

import (
	"context"
	"fmt"
	"os"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Orders embed {id, name, email} of their customer; renaming the customer
// through Update rewrites the copies.
func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_extref")
	defer db.Drop(ctx)

	type CustomerRef struct {
		ID    string `bson:"id"`
		Name  string `bson:"name"`
		Email string `bson:"email"`
	}
	customers, err := extref.New[CustomerRef](db, extref.Config{
		Source:  "customers",
		Targets: []extref.Target{{Collection: "orders", Path: "customer"}},
	})
	if err != nil {
		panic(err)
	}
	if err := patterns.EnsureIndexes(ctx, customers.Indexes()...); err != nil {
		panic(err)
	}

	_, err = db.Collection("customers").InsertOne(ctx, bson.D{
		{Key: "_id", Value: "ann"}, {Key: "name", Value: "Ann"}, {Key: "email", Value: "ann@example.com"}, {Key: "since", Value: 2019},
	})
	if err != nil {
		panic(err)
	}
	ann, err := customers.Of(ctx, "ann")
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := db.Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "customer", Value: ann}}); err != nil {
			panic(err)
		}
	}

	counts, err := customers.Update(ctx, "ann", bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Ann Smith"}}}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d copies rewritten\n", counts[0].Target, counts[0].Modified)

	var order struct{ Customer CustomerRef }
	if err := db.Collection("orders").FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&order); err != nil {
		panic(err)
	}
	fmt.Printf("order 2: %+v\n", order.Customer)

	// Other code writes a copy behind the repository's back; Verify finds
	// it and names it.
	if _, err := db.Collection("orders").UpdateByID(ctx, 3, bson.D{{Key: "$set", Value: bson.D{{Key: "customer.name", Value: "A. Smith"}}}}); err != nil {
		panic(err)
	}
	reports, err := customers.Verify(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("verify: %d copies, %d stale: %v\n", reports[0].Copies, reports[0].Stale, reports[0].StaleCopies)

	// Output:
	// orders.customer: 3 copies rewritten
	// order 2: {ID:ann Name:Ann Smith Email:ann@example.com}
	// verify: 3 copies, 1 stale: [document 3, source "ann"]
}
