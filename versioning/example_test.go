package versioning_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// Order is the current shape, version 2: the total in cents. Version 1
// stored it as a decimal string in "total".
type Order struct {
	ID         int   `bson:"_id"`
	TotalCents int64 `bson:"totalCents"`
}

// totalToCents is the migration from version 1 to 2.
func totalToCents(d *versioning.Doc) error {
	total, _ := d.Get("total")
	s, ok := total.(string)
	if !ok {
		return fmt.Errorf("total is %T, not a string", total)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	d.Rename("total", "totalCents")
	d.Set("totalCents", int64(math.Round(f*100)))
	return nil
}

func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_versioning")
	defer db.Drop(ctx)

	// Orders stored by the previous release, without a version field.
	_, err = db.Collection("orders").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "total", Value: "12.50"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "total", Value: "3.99"}},
	})
	if err != nil {
		panic(err)
	}

	orders, err := versioning.New[Order](db, versioning.Config{
		Collection: "orders",
		Current:    2,
		Migrations: []versioning.Migration{{From: 1, Up: totalToCents}},
	})
	if err != nil {
		panic(err)
	}
	if err := patterns.EnsureIndexes(ctx, orders.Indexes()...); err != nil {
		panic(err)
	}

	// A read returns the current shape and writes the migration back.
	o, err := orders.Get(ctx, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", o)
	// A write stamps the current version.
	if _, err := orders.Insert(ctx, Order{ID: 3, TotalCents: 700}); err != nil {
		panic(err)
	}
	stats, err := orders.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("versions:", stats.Versions)

	// Migrate the rest eagerly.
	res, err := orders.MigrateAll(ctx, versioning.MigrateOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("migrated:", res.Migrated)
	stats, err = orders.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("versions:", stats.Versions)
	// Output:
	// {ID:1 TotalCents:1250}
	// versions: map[1:1 2:2]
	// migrated: 1
	// versions: map[2:3]
}
