// Command orders shows extended references kept in sync: orders embed
// {id, name, email} of their customer, carts embed {id, name, price} of
// the product in each item. It renames a customer and reprices a product
// through the repository, then lets other code change a product behind
// its back, finds the drift with Verify and fixes it with Repair.
//
//	go -C examples run ./orders
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// CustomerRef is what an order keeps of its customer.
type CustomerRef struct {
	ID    int    `bson:"id"`
	Name  string `bson:"name"`
	Email string `bson:"email"`
}

// ProductRef is what a cart item keeps of its product.
type ProductRef struct {
	ID    int     `bson:"id"`
	Name  string  `bson:"name"`
	Price float64 `bson:"price"`
}

type item struct {
	Product ProductRef `bson:"product"`
	Qty     int        `bson:"qty"`
}

func main() { demo.Run("example_orders", run) }

func run(ctx context.Context, db *mongo.Database) error {

	customers, err := extref.New[CustomerRef](db, extref.Config{
		Source:  "customers",
		Targets: []extref.Target{{Collection: "orders", Path: "customer"}},
	})
	if err != nil {
		return err
	}
	products, err := extref.New[ProductRef](db, extref.Config{
		Source:  "products",
		Targets: []extref.Target{{Collection: "carts", Path: "items[].product"}},
	})
	if err != nil {
		return err
	}
	if err := patterns.EnsureIndexes(ctx, append(customers.Indexes(), products.Indexes()...)...); err != nil {
		return err
	}
	if err := seed(ctx, db, customers, products); err != nil {
		return err
	}

	counts, err := customers.Update(ctx, 2, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Grace Hopper-Smith"}}}})
	if err != nil {
		return err
	}
	fmt.Printf("renamed customer 2: %s\n", describe(counts))

	counts, err = products.Update(ctx, 3, bson.D{{Key: "$mul", Value: bson.D{{Key: "price", Value: 0.9}}}})
	if errors.Is(err, extref.ErrNotSynced) {
		// The price changed and only its copies may be stale: Sync is the
		// retry (running the $mul again would apply it twice).
		counts, err = products.Sync(ctx, 3)
	}
	if err != nil {
		return err
	}
	fmt.Printf("product 3 ten percent off: %s\n", describe(counts))

	// Other code renames a product directly: its copies drift.
	if _, err := db.Collection("products").UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Espresso beans 1kg"}}}}); err != nil {
		return err
	}
	reports, err := products.Verify(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("verify after a direct rename: %d of %d copies stale\n", reports[0].Stale, reports[0].Copies)
	reports, err = products.Repair(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("repair: %d carts rewritten\n", reports[0].Repaired)
	reports, err = products.Verify(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("verify again: %d stale\n", reports[0].Stale)

	switch err := products.Watch(ctx, nil); {
	case errors.Is(err, patterns.ErrUnsupported):
		fmt.Printf("watch: %v; run Repair on a schedule instead\n", err)
	case err != nil:
		return err
	}
	return nil
}

// seed stores 3 customers, 4 products, 12 orders and 6 carts, each
// embedding copies taken with OfMany.
func seed(ctx context.Context, db *mongo.Database, customers *extref.Ref[CustomerRef], products *extref.Ref[ProductRef]) error {
	names := []string{"Ada Lovelace", "Grace Hopper", "Alan Turing"}
	var docs []any
	for i, n := range names {
		docs = append(docs, bson.D{{Key: "_id", Value: i + 1}, {Key: "name", Value: n}, {Key: "email", Value: fmt.Sprintf("c%d@example.com", i+1)}})
	}
	if _, err := db.Collection("customers").InsertMany(ctx, docs); err != nil {
		return err
	}
	docs = nil
	for i, n := range []string{"Espresso beans", "Grinder", "Kettle", "Mug"} {
		docs = append(docs, bson.D{{Key: "_id", Value: i + 1}, {Key: "name", Value: n}, {Key: "price", Value: 10 * float64(i+1)}, {Key: "stock", Value: 50}})
	}
	if _, err := db.Collection("products").InsertMany(ctx, docs); err != nil {
		return err
	}

	// The copies of every referenced document in one round trip per
	// source collection, embedded in all that reference it.
	cust, err := customers.OfMany(ctx, []any{1, 2, 3})
	if err != nil {
		return err
	}
	prod, err := products.OfMany(ctx, []any{1, 2, 3, 4})
	if err != nil {
		return err
	}
	docs = nil
	for i := range 12 {
		docs = append(docs, bson.D{{Key: "_id", Value: i + 1}, {Key: "customer", Value: cust[i%3]}, {Key: "total", Value: 25 * (i + 1)}})
	}
	if _, err := db.Collection("orders").InsertMany(ctx, docs); err != nil {
		return err
	}
	docs = nil
	for i := range 6 {
		var items []item
		for p := 1; p <= 4; p++ {
			if (i+p)%2 == 0 || p == 3 {
				items = append(items, item{Product: prod[p-1], Qty: p})
			}
		}
		docs = append(docs, bson.D{{Key: "_id", Value: i + 1}, {Key: "items", Value: items}})
	}
	_, err = db.Collection("carts").InsertMany(ctx, docs)
	return err
}

// describe says what a sync rewrote, per target.
func describe(counts []extref.Count) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%d %s rewritten", c.Modified, c.Target)
	}
	return strings.Join(parts, ", ")
}
