package mongotest_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
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
	for _, f := range patterns.AllFeatures() {
		var ran bool
		t.Run(string(f), func(t *testing.T) {
			mongotest.Require(t, f)
			ran = true
		})
		require.Equal(t, srv.Has(f), ran, "feature %s", f)
	}
}

// TestConcurrentIncrementsAreExact hammers one document from 8 goroutines
// through the shared client. On FerretDB 1.x it holds only because the
// harness gives the client a single connection there.
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

func TestPoolFollowsConcurrentUpdates(t *testing.T) {
	// The shared client has one connection exactly where concurrent
	// updates are not atomic: a command held in an OnCommand hook keeps
	// the connection, and a second command from the same client waits.
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("c")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	require.NoError(t, err)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	mongotest.OnCommand(t, db, "find", func(context.Context) {
		entered <- struct{}{}
		<-release
	})
	done := make(chan error, 1)
	go func() { done <- coll.FindOne(ctx, bson.D{}).Err() }()
	<-entered
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = coll.CountDocuments(ctx2, bson.D{}) // "aggregate", not held
	close(release)
	require.NoError(t, <-done)
	if mongotest.Server().Has(patterns.FeatureConcurrentUpdates) {
		require.NoError(t, err, "several connections: the second command does not wait")
	} else {
		require.ErrorIs(t, err, context.DeadlineExceeded, "one connection: the second command waits for the first")
	}
}

func TestOnCommandRunsBeforeTheCommand(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	other := mongotest.NewClient(t).Database(db.Name()).Collection("c")
	coll := db.Collection("c")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "before"}})
	require.NoError(t, err)
	calls := 0
	mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
		calls++
		// Another writer, in the window before the update is sent.
		_, err := other.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "other"}}}})
		require.NoError(t, err)
	})
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "before"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "mine"}}}})
	require.NoError(t, err)
	require.Equal(t, 1, calls, "the hook's own update, sent with its context, runs no hook")
	require.Zero(t, res.MatchedCount, "the other writer's update landed first")
}

func TestRunPlans(t *testing.T) {
	type plan struct{ native bool }
	planFor := func(s *patterns.Server) plan { return plan{native: s.Has(patterns.FeaturePushModifiers)} }
	var ran []plan
	t.Run("runs", func(t *testing.T) {
		mongotest.RunPlans(t, planFor, func(t *testing.T, p plan) { ran = append(ran, p) })
	})
	want := []plan{{native: false}}
	if mongotest.Server().Has(patterns.FeaturePushModifiers) {
		want = []plan{{native: true}, {native: false}}
	}
	require.Equal(t, want, ran, "the native plan runs where the server takes it; the portable one everywhere")

	servers := mongotest.KnownServers()
	require.Equal(t, slices.DeleteFunc(patterns.AllFeatures(), func(f patterns.Feature) bool { return f == patterns.FeatureWritesWithoutShardKey }),
		mongotest.Native().Features(), "a replica set has every feature but those of a sharded cluster")
	require.Empty(t, mongotest.Portable().Features())
	require.Empty(t, servers["FerretDB 1.24"].Features())
	require.True(t, servers["FerretDB 2.7"].Has(patterns.FeaturePushModifiers))
	require.False(t, servers["FerretDB 2.7"].Has(patterns.FeatureTransactions))
	require.False(t, servers["MongoDB 6 standalone"].Has(patterns.FeatureTransactions))
	require.Empty(t, servers["other"].Features())
	for _, name := range mongotest.Mongos() {
		require.Equal(t, patterns.Sharded, servers[name].Topology, name)
		require.True(t, servers[name].Has(patterns.FeatureTransactions), name)
	}
	// A mongos answers getParameter's FCV with its binary version
	// (SERVER-100224): no mongos is known to take writes without the key.
	for _, name := range mongotest.Mongos() {
		require.False(t, servers[name].Has(patterns.FeatureWritesWithoutShardKey), name)
	}
}

func TestScale(t *testing.T) {
	got := mongotest.Scale(1000, 10)
	require.Contains(t, []int{1000, 10}, got)
	t.Logf("Scale(1000, 10) = %d on %s", got, mongotest.Server())
}

// BenchmarkCompareWithItself compares an InsertOne with itself: speed-x and
// allocs-x come out near 1.
func BenchmarkCompareWithItself(b *testing.B) {
	side := func(b *testing.B) func(int) {
		coll := mongotest.DB(b).Collection("c")
		return func(i int) {
			_, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}})
			require.NoError(b, err)
		}
	}
	mongotest.Compare(b, mongotest.Comparison{Library: side, Baseline: side, Speed: 0.5, Allocs: 2})
}

// errorsOf records what a check reports instead of failing the test.
type errorsOf struct {
	testing.TB
	errs []string
}

func (e *errorsOf) Helper() {}
func (e *errorsOf) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestRequireTargetedRoutesWhatWasSent(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	c := mongotest.NewCounter(t, db)
	coll := db.Collection("items")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "parent", Value: "p"}})
	require.NoError(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "parent", Value: "p"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}})
	require.NoError(t, err)
	_, err = coll.UpdateMany(ctx, bson.D{{Key: "n", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: 1}}}})
	require.NoError(t, err)

	byParent := shard.Cluster{Version: patterns.Version{Major: 6}, Keys: map[string]shard.Key{
		"items": shard.MustParseKey(bson.D{{Key: "parent", Value: 1}}),
	}}
	rec := &errorsOf{TB: t}
	routes := c.RequireTargeted(rec, byParent, nil)
	require.Len(t, routes, 3, "insert, update, update")
	require.Len(t, rec.errs, 1, "only the updateMany goes to every shard: %v", rec.errs)
	require.Contains(t, rec.errs[0], "every shard")

	rec = &errorsOf{TB: t}
	c.RequireTargeted(rec, byParent, map[string]string{"update items": "updateMany by n goes to every shard"})
	require.Empty(t, rec.errs)

	byID := shard.Cluster{Version: patterns.Version{Major: 6}, Keys: map[string]shard.Key{
		"items": shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}}),
	}}
	rec = &errorsOf{TB: t}
	c.RequireTargeted(rec, byID, map[string]string{"update items": "allowed"})
	require.Len(t, rec.errs, 1, "an updateOne by parent is refused on 6.0 under a hashed _id: %v", rec.errs)
	require.Contains(t, rec.errs[0], "refuse")

	rec = &errorsOf{TB: t}
	c.RequireRefused(rec, byID, map[string]string{"update items": "allowed"}, map[string][]int32{"update items": {72}})
	require.Empty(t, rec.errs, "the refusal is the one the test expects")
	rec = &errorsOf{TB: t}
	c.RequireRefused(rec, byParent, map[string]string{"update items": "allowed"}, map[string][]int32{"update items": {72}})
	require.Len(t, rec.errs, 1, "an expected refusal that does not happen fails: %v", rec.errs)
	require.Contains(t, rec.errs[0], "was not refused with code 72")
}

// TestCompareRunsASlowOperationMinPairsTimes: when one pair outlasts
// -benchtime (a duration), the testing package stops after one pair;
// Compare runs MinPairs pairs anyway, so that the ratio has an interval,
// and reports ns/op over them. With -benchtime Nx it runs N pairs.
func TestCompareRunsASlowOperationMinPairsTimes(t *testing.T) {
	old := flag.Lookup("test.benchtime").Value.String()
	t.Cleanup(func() { require.NoError(t, flag.Set("test.benchtime", old)) })
	for _, tc := range []struct {
		benchtime string
		pairs     int
	}{{"50ms", mongotest.MinPairs}, {"3x", 3}} {
		require.NoError(t, flag.Set("test.benchtime", tc.benchtime))
		var lib, base int
		side := func(n *int) func(*testing.B) func(int) {
			return func(*testing.B) func(int) {
				return func(int) { *n++; time.Sleep(30 * time.Millisecond) }
			}
		}
		res := testing.Benchmark(func(b *testing.B) {
			lib, base = 0, 0 // each call of the testing package starts again
			mongotest.Compare(b, mongotest.Comparison{Library: side(&lib), Baseline: side(&base), Speed: 0.5})
		})
		require.Equal(t, tc.pairs, lib, tc.benchtime)
		require.Equal(t, tc.pairs, base, tc.benchtime)
		if tc.pairs >= 6 {
			require.Contains(t, res.Extra, "speed-lo-x", "an interval: %v", res.Extra)
		}
		require.InDelta(t, 60e6, float64(res.NsPerOp()), 30e6, "a pair's time, not the testing package's b.N's")
	}
}
