package extref_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestNewRejects(t *testing.T) {
	db := mongotest.Client().Database("extref_new_rejects") // New sends nothing
	orders := []extref.Target{{Collection: "orders", Path: "customer"}}
	tests := []struct {
		name string
		db   *mongo.Database
		cfg  extref.Config
		says string
	}{
		{"nil database", nil, extref.Config{Source: "customers", Targets: orders}, "nil database"},
		{"no source", db, extref.Config{Targets: orders}, "config.Source"},
		{"bad source", db, extref.Config{Source: "$cmd", Targets: orders}, "'$'"},
		{"no targets", db, extref.Config{Source: "customers"}, "no targets"},
		{"target without collection", db, extref.Config{Source: "customers", Targets: []extref.Target{{Path: "customer"}}}, "config.Targets[0]"},
		{"bad path", db, extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer.$x"}}}, "operator"},
		{"nested arrays", db, extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "a[].b[].c"}}}, "only one"},
		{"overlapping targets", db, extref.Config{Source: "customers", Targets: []extref.Target{
			{Collection: "orders", Path: "customer"}, {Collection: "orders", Path: "customer.previous"},
		}}, "overlap"},
		{"same target twice", db, extref.Config{Source: "customers", Targets: []extref.Target{
			{Collection: "orders", Path: "lines[].customer"}, {Collection: "orders", Path: "lines.customer"},
		}}, "overlap"},
		{"id field the copy lacks", db, extref.Config{Source: "customers", IDField: "customerId", Targets: orders}, `no field "customerId"`},
		{"bad id field", db, extref.Config{Source: "customers", IDField: "a.b", Targets: orders}, "IDField"},
		{"negative batch", db, extref.Config{Source: "customers", Targets: orders, BatchSize: -1}, "negative"},
		{"huge batch", db, extref.Config{Source: "customers", Targets: orders, BatchSize: 1 << 40}, "maximum"},
		{"negative transaction limit", db, extref.Config{Source: "customers", Targets: orders, TransactionLimit: -1}, "TransactionLimit -1 is negative"},
		{"negative report sample", db, extref.Config{Source: "customers", Targets: orders, ReportSample: -1}, "ReportSample -1 is negative"},
		{"shard key on _id", db, extref.Config{Source: "customers", Targets: orders, ShardKey: []string{"region", "_id"}}, `config.ShardKey: "_id": every filter holds the _id already`},
		{"shard key twice", db, extref.Config{Source: "customers", Targets: orders, ShardKey: []string{"region", "region"}}, `config.ShardKey: "region" is given twice`},
		{"bad shard key path", db, extref.Config{Source: "customers", Targets: orders, ShardKey: []string{"geo..region"}}, "config.ShardKey: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := extref.New[CustomerRef](tc.db, tc.cfg)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.Contains(t, err.Error(), tc.says)
		})
	}

	_, err := extref.New[CustomerRef](nil, extref.Config{Source: "customers", Targets: orders})
	require.EqualError(t, err, "extref: New: nil database: invalid")
	_, err = extref.New[CustomerRef](db, extref.Config{Source: "customers"})
	require.EqualError(t, err, "extref: New: no targets: invalid")

	_, err = extref.New[struct {
		ID int `bson:"id"`
	}](db, extref.Config{Source: "customers", Targets: orders})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.Contains(t, err.Error(), "no copied fields")

	_, err = extref.New[CustomerRef](db, extref.Config{Source: "customers", Targets: []extref.Target{
		{Collection: "orders", Path: "customer"}, {Collection: "invoices", Path: "customer"}, {Collection: "orders", Path: "billTo"},
	}})
	require.NoError(t, err, "the same path in two collections, two paths in one")
	_, err = extref.New[CustomerRef](db, extref.Config{Source: "customers", Targets: orders, ShardKey: []string{"region", "geo.zone"}})
	require.NoError(t, err, "a compound shard key with a nested field")
}

func TestIndexes(t *testing.T) {
	db := mongotest.DB(t)
	r, err := extref.New[ProductRef](db, extref.Config{Source: "products", Targets: []extref.Target{
		{Collection: "carts", Path: "items[].product"},
		{Collection: "featured", Path: "product"},
		{Collection: "bundles", Path: "parts[]"},
	}})
	require.NoError(t, err)
	var keys []bson.D
	var everyShard []bool
	for _, ix := range r.Indexes() {
		keys = append(keys, ix.Model.Keys.(bson.D))
		everyShard = append(everyShard, ix.EveryShard != "")
	}
	require.Equal(t, []bool{true, false, true}, everyShard, "an array target's index serves a Sync that goes to every shard (a shard key cannot hold an array)")
	require.Equal(t, []bson.D{
		{{Key: "items.product.id", Value: 1}},
		{{Key: "product.id", Value: 1}},
		{{Key: "parts.id", Value: 1}},
	}, keys)
	require.Equal(t, []string{"carts", "featured", "bundles"}, []string{
		r.Indexes()[0].Collection.Name(), r.Indexes()[1].Collection.Name(), r.Indexes()[2].Collection.Name(),
	})
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	specs, err := db.Collection("carts").Indexes().ListSpecifications(ctx)
	require.NoError(t, err)
	require.Len(t, specs, 2)
	require.Equal(t, "items.product.id_1", specs[1].Name)
}
