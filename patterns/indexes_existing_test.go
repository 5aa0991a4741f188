package patterns_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Promise (patterns/indexes.go:35): "an index that already exists with the
// same key and options is left as it is ... sends one listIndexes, then one
// createIndexes of the indexes that do not exist yet". Two declared indexes
// with one key (e.g. two repositories declaring the same index on a shared
// collection) both go into one createIndexes. MongoDB refuses that:
// "Cannot build two identical indexes. Try again without duplicate
// indexes." (OperationFailed 96, src/mongo/db/catalog/multi_index_block.cpp;
// FerretDB's own compat test TestCreateIndexesCommandInvalidSpec/SameIndex
// records MongoDB's answer).
func TestEnsureIndexesTwoDeclaredWithOneKey(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("shared")
	key := bson.D{{Key: "k", Value: 1}}
	ix := patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: key}}
	counter := mongotest.NewCounter(t, db)
	var ensureErr error
	sent := counter.Count(func() { ensureErr = patterns.EnsureIndexes(ctx, ix, ix) })
	mongotest.Detail(t, "sent %v", sent)
	require.NoError(t, ensureErr)
	cur, err := coll.Indexes().List(ctx)
	require.NoError(t, err)
	var specs []bson.M
	require.NoError(t, cur.All(ctx, &specs))
	mongotest.Detail(t, "sent %v; indexes %v", sent, specs)
	require.Len(t, specs, 2, "_id_ and k_1")
}

// The same with the key spelt differently (1 and 1.0: "numbers by value
// ... are one direction"), and a second name.
func TestEnsureIndexesTwoDeclaredWithOneKeyTwoNames(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("shared")
	a := patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}}
	b := patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1.0}}, Options: options.Index().SetName("byK")}}
	err := patterns.EnsureIndexes(ctx, a, b)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, a, b))
}

// Promise (indexes.go:35): "an index created by hand under another name is
// the index", keys "field by field". A text index: the server lists its key
// as {_fts: "text", _ftsx: 1}, not as declared ({title: "text"}; MongoDB
// manual, "Text Indexes": the key pattern stored is _fts/_ftsx). So the
// declared text index is never found, and a hand-made one under another
// name gets a createIndexes that MongoDB refuses with IndexOptionsConflict
// (85) ("An equivalent index already exists with a different name"), the
// very failure issue 35 §4 reports.
func TestEnsureIndexesTextIndexUnderAnotherName(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("docs")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "title", Value: "text"}}, Options: options.Index().SetName("search"),
	})
	if err != nil {
		t.Skipf("skipped: server lacks text indexes: %v", err)
	}
	cur, err := coll.Indexes().List(ctx)
	require.NoError(t, err)
	var specs []bson.M
	require.NoError(t, cur.All(ctx, &specs))
	mongotest.Detail(t, "listIndexes: %v", specs)
	declared := patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: bson.D{{Key: "title", Value: "text"}}}}
	counter := mongotest.NewCounter(t, db)
	var ensureErr error
	sent := counter.Count(func() { ensureErr = patterns.EnsureIndexes(ctx, declared) })
	require.NoError(t, ensureErr)
	require.Equal(t, []string{"listIndexes"}, sent)
}

// Promise (indexes.go:45): "An existing index with the same key and other
// options is an error". MongoDB allows several indexes of one key pattern
// that differ in partialFilterExpression (manual, "Partial Indexes":
// "you can create multiple partial indexes using the same key pattern as
// long as the partialFilterExpression fields express distinct filters")
// or in collation. When the declared one exists second, EnsureIndexes
// compares it with the first of that key only and fails.
func TestEnsureIndexesSecondIndexOfOneKey(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("p")
	key := bson.D{{Key: "a", Value: 1}}
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: key, Options: options.Index().SetName("p1").
		SetPartialFilterExpression(bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 1}}}})})
	if err != nil {
		t.Skipf("skipped: server lacks partial indexes: %v", err)
	}
	second := mongo.IndexModel{Keys: key, Options: options.Index().SetName("p2").
		SetPartialFilterExpression(bson.D{{Key: "y", Value: bson.D{{Key: "$gt", Value: 1}}}})}
	if _, err := coll.Indexes().CreateOne(ctx, second); err != nil {
		t.Skipf("skipped: server refuses a second partial index of one key: %v", err)
	}
	require.NoError(t, patterns.EnsureIndexes(ctx, patterns.Index{Collection: coll, Model: second}))
}

// Promise (indexes.go:47): "partialFilterExpression" compared; the
// server keeps the document as given, and a declared filter whose fields
// come in another order is not the same document. Here: same filter, same
// order, but numbers of another type (5 vs 5.0): must be equal.
func TestEnsureIndexesPartialFilterNumbers(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("pf")
	key := bson.D{{Key: "a", Value: 1}}
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: key, Options: options.Index().
		SetPartialFilterExpression(bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 5.0}}}})})
	if err != nil {
		t.Skipf("skipped: server lacks partial indexes: %v", err)
	}
	declared := mongo.IndexModel{Keys: key, Options: options.Index().
		SetPartialFilterExpression(bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: int32(5)}}}})}
	require.NoError(t, patterns.EnsureIndexes(ctx, patterns.Index{Collection: coll, Model: declared}))
}

// A collection that does not exist: one listIndexes, one createIndexes.
func TestEnsureIndexesMissingCollection(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("nope")
	counter := mongotest.NewCounter(t, db)
	sent := counter.Count(func() {
		require.NoError(t, patterns.EnsureIndexes(ctx, patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}}))
	})
	require.Equal(t, []string{"listIndexes", "createIndexes"}, sent)
}

// Promise (indexes.go:35): idempotent, "an index that already exists with
// the same key and options is left as it is". An index declared with the
// simple collation ({locale: "simple"}, the collation MongoDB uses when
// none is given) is stored without a collation field (MongoDB manual,
// "Collation": locale "simple" is the simple binary comparison; the index
// spec listIndexes returns omits it), so the second run reports
// "collation.locale: has none, declared "simple"" and fails.
func TestEnsureIndexesSimpleCollationTwice(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	ix := patterns.Index{Collection: db.Collection("c"), Model: mongo.IndexModel{
		Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetCollation(&options.Collation{Locale: "simple"}),
	}}
	if err := patterns.EnsureIndexes(ctx, ix); err != nil {
		t.Skipf("skipped: server refuses an index collation: %v", err)
	}
	cur, err := ix.Collection.Indexes().List(ctx)
	require.NoError(t, err)
	var specs []bson.M
	require.NoError(t, cur.All(ctx, &specs))
	mongotest.Detail(t, "listIndexes: %v", specs)
	require.NoError(t, patterns.EnsureIndexes(ctx, ix))
}
