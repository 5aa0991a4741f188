// Package doctortest writes databases for testing tools built on package
// doctor, as net/http/httptest serves handlers: [AntiPatterns] holds each
// anti-pattern the doctor reports, [Clean] realistic data that must yield
// no finding. The doctor's own tests, and those of the mongopatterns
// command, check them; a service can use them to test the CI job that
// gates on the doctor.
package doctortest

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Epoch is the time the seeded documents are stamped from.
var Epoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// Statuses of the seeded orders.
var Statuses = []string{"paid", "shipped", "cancelled"}

// status is the status of the i-th order: most orders are paid (7 in 10),
// 2 in 10 shipped, 1 in 10 cancelled.
func status(i int) string {
	switch i % 10 {
	case 7, 8:
		return Statuses[1]
	case 9:
		return Statuses[2]
	default:
		return Statuses[0]
	}
}

// Attributes are the 40 attribute names of the items collection; each
// item document holds one of them as "attr_<name>".
var Attributes = []string{
	"color", "size", "weight", "material", "brand", "pattern", "fit", "length", "width", "height",
	"voltage", "wattage", "capacity", "finish", "style", "season", "gender", "age", "flavor", "scent",
	"origin", "warranty", "battery", "screen", "memory", "storage", "speed", "resolution", "connector", "range",
	"texture", "thickness", "diameter", "grip", "sole", "closure", "neckline", "sleeve", "lining", "pocket",
}

// Orders is the number of documents in the seeded orders collections.
const Orders = 60

// AntiPatterns writes, with InsertMany and createIndexes only (about 20
// commands):
//
//   - products: 20 products with 2 to 5 reviews, and one with 1,500 (an
//     unbounded array); an index {name: 1};
//   - files: 4 small files and one of 3 MB (a bloated document);
//   - orders: 60 orders {customerId, status, createdAt, total} with the
//     indexes {customerId: 1}, {customerId: 1, createdAt: -1} (the first a
//     prefix of the second) and {createdAt: 1, status: 1};
//   - items: 40 items, each with a different "attr_<name>" key (dynamic
//     field names);
//   - catalog: documents with a tags array or a sizes array, and an index
//     {tags: 1, sizes: 1} (two array fields in one compound index);
//   - customers: 10 customers with a code field and no index on it;
//   - readings: 300 small time-stamped readings.
func AntiPatterns(ctx context.Context, db *mongo.Database) error {
	var products []any
	for i := range 20 {
		var reviews bson.A
		for j := range 2 + i%4 {
			reviews = append(reviews, bson.D{{Key: "by", Value: fmt.Sprintf("u%d", j)}, {Key: "stars", Value: 1 + (i+j)%5}})
		}
		products = append(products, bson.D{{Key: "name", Value: fmt.Sprintf("product %d", i)}, {Key: "reviews", Value: reviews}})
	}
	var many bson.A
	for j := range 1500 {
		many = append(many, bson.D{{Key: "by", Value: fmt.Sprintf("u%d", j)}, {Key: "stars", Value: 1 + j%5}})
	}
	products = append(products, bson.D{{Key: "name", Value: "kettle"}, {Key: "reviews", Value: many}})

	files := []any{}
	for i := range 4 {
		files = append(files, bson.D{{Key: "name", Value: fmt.Sprintf("note%d.txt", i)}, {Key: "content", Value: bson.Binary{Data: make([]byte, 2_000)}}})
	}
	files = append(files, bson.D{{Key: "name", Value: "scan.pdf"}, {Key: "content", Value: bson.Binary{Data: make([]byte, 3_000_000)}}})

	var items []any
	for i, a := range Attributes {
		items = append(items, bson.D{{Key: "name", Value: fmt.Sprintf("item %d", i)}, {Key: "attr_" + a, Value: fmt.Sprintf("value %d", i)}})
	}

	var catalog []any
	for i := range 10 {
		if i%2 == 0 {
			catalog = append(catalog, bson.D{{Key: "sku", Value: fmt.Sprintf("s%d", i)}, {Key: "tags", Value: bson.A{"a", "b"}}, {Key: "sizes", Value: "M"}})
		} else {
			catalog = append(catalog, bson.D{{Key: "sku", Value: fmt.Sprintf("s%d", i)}, {Key: "tags", Value: "c"}, {Key: "sizes", Value: bson.A{"S", "M", "L"}}})
		}
	}

	var customers []any
	for i := range 10 {
		customers = append(customers, bson.D{{Key: "code", Value: fmt.Sprintf("c%d", i)}, {Key: "name", Value: fmt.Sprintf("customer %d", i)}})
	}

	var readings []any
	for i := range 300 {
		readings = append(readings, bson.D{{Key: "sensor", Value: fmt.Sprintf("s%d", i%5)}, {Key: "ts", Value: Epoch.Add(time.Duration(i) * time.Minute)}, {Key: "value", Value: float64(i%40) / 2}})
	}

	writes := []struct {
		coll    string
		docs    []any
		indexes []mongo.IndexModel
	}{
		{"products", products, []mongo.IndexModel{index(bson.D{{Key: "name", Value: 1}})}},
		{"files", files, nil},
		{"orders", orders(), []mongo.IndexModel{
			index(bson.D{{Key: "customerId", Value: 1}}),
			index(bson.D{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: -1}}),
			index(bson.D{{Key: "createdAt", Value: 1}, {Key: "status", Value: 1}}),
		}},
		{"items", items, nil},
		{"catalog", catalog, []mongo.IndexModel{index(bson.D{{Key: "tags", Value: 1}, {Key: "sizes", Value: 1}})}},
		{"customers", customers, nil},
		{"readings", readings, nil},
	}
	for _, w := range writes {
		if err := insert(ctx, db.Collection(w.coll), w.docs, w.indexes...); err != nil {
			return err
		}
	}
	return nil
}

// orders are the orders of AntiPatterns: Orders documents with ObjectId
// ids (so in insertion order), ten customers in turn, mostly paid.
func orders() []any {
	var out []any
	for i := range Orders {
		out = append(out, bson.D{
			{Key: "_id", Value: bson.NewObjectIDFromTimestamp(Epoch.Add(time.Duration(i) * time.Hour))},
			{Key: "customerId", Value: fmt.Sprintf("c%d", i%10)},
			{Key: "status", Value: status(i)},
			{Key: "createdAt", Value: Epoch.Add(time.Duration(i) * time.Hour)},
			{Key: "total", Value: float64(10 + i*7%200)},
		})
	}
	return out
}

// Clean writes a database of realistic data within every threshold:
// customers with an embedded address and a few tags, orders with up to 12
// line items, products with a fixed set of specs; indexes in ESR order,
// none a prefix of another, one of them compound over the fields of the
// line items ({"items.sku": 1, "items.qty": 1}: one array, a valid
// compound multikey index). About 10 commands.
func Clean(ctx context.Context, db *mongo.Database) error {
	countries := []string{"FR", "DE", "NL", "IT"}
	var customers []any
	for i := range 50 {
		customers = append(customers, bson.D{
			{Key: "name", Value: fmt.Sprintf("Customer %d", i)},
			{Key: "email", Value: fmt.Sprintf("customer%d@example.com", i)},
			{Key: "address", Value: bson.D{
				{Key: "street", Value: fmt.Sprintf("%d Main Street", i)},
				{Key: "city", Value: "Springfield"},
				{Key: "zip", Value: fmt.Sprintf("%05d", 10000+i)},
				{Key: "country", Value: countries[i%len(countries)]},
			}},
			{Key: "tags", Value: bson.A{"newsletter", fmt.Sprintf("segment-%d", i%3)}},
			{Key: "createdAt", Value: Epoch.Add(time.Duration(i) * 24 * time.Hour)},
		})
	}
	var orders []any
	for i := range 100 {
		var lines bson.A
		total := 0.0
		for j := range 1 + i%12 {
			price := float64(5 + (i+j)%40)
			total += price
			lines = append(lines, bson.D{{Key: "sku", Value: fmt.Sprintf("sku-%d", (i+j)%30)}, {Key: "qty", Value: 1 + j%3}, {Key: "price", Value: price}})
		}
		orders = append(orders, bson.D{
			{Key: "customerId", Value: fmt.Sprintf("customer%d@example.com", i%50)},
			{Key: "status", Value: status(i)},
			{Key: "createdAt", Value: Epoch.Add(time.Duration(i) * time.Hour)},
			{Key: "items", Value: lines},
			{Key: "total", Value: total},
		})
	}
	var products []any
	for i := range 30 {
		var tags bson.A
		for j := range 1 + i%8 {
			tags = append(tags, fmt.Sprintf("tag-%d", (i+j)%12))
		}
		products = append(products, bson.D{
			{Key: "sku", Value: fmt.Sprintf("sku-%d", i)},
			{Key: "name", Value: fmt.Sprintf("Product %d", i)},
			{Key: "price", Value: float64(5 + i)},
			{Key: "tags", Value: tags},
			{Key: "specs", Value: bson.D{{Key: "weight", Value: 100 + i}, {Key: "color", Value: "black"}, {Key: "size", Value: "M"}}},
		})
	}
	unique := options.Index().SetUnique(true)
	if err := insert(ctx, db.Collection("customers"), customers,
		mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: unique}); err != nil {
		return err
	}
	if err := insert(ctx, db.Collection("orders"), orders,
		index(bson.D{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: -1}}),
		index(bson.D{{Key: "status", Value: 1}, {Key: "createdAt", Value: -1}}),
		index(bson.D{{Key: "items.sku", Value: 1}, {Key: "items.qty", Value: 1}})); err != nil {
		return err
	}
	return insert(ctx, db.Collection("products"), products,
		mongo.IndexModel{Keys: bson.D{{Key: "sku", Value: 1}}, Options: unique},
		index(bson.D{{Key: "tags", Value: 1}}))
}

func index(keys bson.D) mongo.IndexModel { return mongo.IndexModel{Keys: keys} }

// insert writes the documents with one InsertMany, then creates the
// indexes with one createIndexes each (FerretDB 1.24 drops the connection
// on some createIndexes of several indexes).
func insert(ctx context.Context, coll *mongo.Collection, docs []any, indexes ...mongo.IndexModel) error {
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		return fmt.Errorf("doctortest: insert into %s: %w", coll.Name(), err)
	}
	for _, m := range indexes {
		if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
			return fmt.Errorf("doctortest: index %v on %s: %w", m.Keys, coll.Name(), err)
		}
	}
	return nil
}
