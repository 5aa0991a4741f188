package mongotest_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func TestDBIsFreshAndDroppedAtCleanup(t *testing.T) {
	ctx := context.Background()
	var name string
	t.Run("use", func(t *testing.T) {
		db := mongotest.DB(t)
		other := mongotest.DB(t)
		require.NotEqual(t, db.Name(), other.Name())
		n, err := db.Collection("c").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.Zero(t, n, "a new database is empty")
		_, err = db.Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		require.NoError(t, err)
		names, err := mongotest.Client().ListDatabaseNames(ctx, bson.D{})
		require.NoError(t, err)
		require.Contains(t, names, db.Name())
		name = db.Name()
	})
	names, err := mongotest.Client().ListDatabaseNames(ctx, bson.D{})
	require.NoError(t, err)
	require.NotContains(t, names, name, "the database is dropped when its test ends")
}

func TestCounterCountsRoundTripsOfOneDatabase(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	other := mongotest.DB(t)
	c := mongotest.NewCounter(t, db)
	coll := db.Collection("c")

	got := c.Count(func() {
		_, err := coll.InsertMany(ctx, []any{bson.D{{Key: "i", Value: 1}}, bson.D{{Key: "i", Value: 2}}, bson.D{{Key: "i", Value: 3}}})
		require.NoError(t, err)
	})
	require.Equal(t, []string{"insert"}, got, "InsertMany of 3 small documents is one command")

	got = c.Count(func() {
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
		require.NoError(t, err)
		var docs []bson.M
		require.NoError(t, cur.All(ctx, &docs))
		require.Len(t, docs, 3)
	})
	require.Equal(t, []string{"find", "getMore"}, got, "a batch of 2 over 3 documents takes a getMore")

	got = c.Count(func() {
		_, err := other.Collection("c").InsertOne(ctx, bson.D{{Key: "i", Value: 1}})
		require.NoError(t, err)
	})
	require.Empty(t, got, "commands to another database are not counted")
}

func TestRequireSkipsWhatTheServerLacks(t *testing.T) {
	srv := mongotest.Server()
	for _, f := range patterns.AllFeatures {
		var ran bool
		t.Run(string(f), func(t *testing.T) {
			mongotest.Require(t, f)
			ran = true
		})
		require.Equal(t, srv.Has(f), ran, "feature %s", f)
	}
}

// TestConcurrentIncrementsAreExact hammers one document from 8 goroutines
// through the shared client. On FerretDB it holds only because the harness
// gives the client a single connection.
func TestConcurrentIncrementsAreExact(t *testing.T) {
	ctx := context.Background()
	coll := mongotest.DB(t).Collection("counter")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
	require.NoError(t, err)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var doc struct{ N int }
	require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	require.Equal(t, workers*each, doc.N)
}

func TestServerIsKnown(t *testing.T) {
	srv := mongotest.Server()
	require.NotEmpty(t, srv.Version.Raw)
	require.NotEmpty(t, mongotest.URI())
	t.Logf("server: %s; features: %v", srv, srv.Features())
	require.True(t, slices.Contains([]patterns.Kind{patterns.KindMongoDB, patterns.KindFerretDB, patterns.KindOther}, srv.Kind))
}
