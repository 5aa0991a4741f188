package patterns_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/probe"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestCapabilitiesMatchTheServer runs every probe of package probe (the
// ones "mongopatterns probe" runs) and checks that the flag Capabilities
// reports is what the server really does: no feature over-claimed (the
// library would trust what the server gets wrong) and none under-claimed
// (it would take a slower path for nothing).
func TestCapabilitiesMatchTheServer(t *testing.T) {
	srv := mongotest.Server()
	rep, err := probe.Run(context.Background(), mongotest.URI(), probe.Options{})
	require.NoError(t, err)
	mongotest.Detail(t, "server: %s; %d probes in %s", rep.Server, len(rep.Results), rep.Elapsed)
	require.Equal(t, srv.String(), rep.Server)
	require.Len(t, rep.Results, len(patterns.AllFeatures()))
	for i, f := range patterns.AllFeatures() {
		r := rep.Results[i]
		require.Equal(t, f, r.Feature)
		t.Run(string(f), func(t *testing.T) {
			mongotest.Detail(t, "%s in %s: %s", r.Measured, r.Elapsed, r.Evidence)
			require.Equal(t, srv.Has(f), r.Detected)
			if f == patterns.FeatureWritesWithoutShardKey && srv.Topology != patterns.Sharded {
				require.Equal(t, probe.Unmeasured, r.Verdict, "measured only on a mongos: %s", r.Evidence)
				return
			}
			require.Contains(t, []probe.Verdict{probe.OK, probe.Absent}, r.Verdict,
				"%s: Capabilities says %v, the server really does %s: %s", f, srv.Has(f), r.Measured, r.Evidence)
		})
	}
}

// TestCapabilitiesSendsTwoReadsOncePerClient checks the cache: 8
// concurrent first callers on a new client share one detection of two
// commands (hello, buildInfo) to the admin database, and later calls send
// nothing.
func TestCapabilitiesSendsTwoReadsOncePerClient(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var sent []string
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		sent = append(sent, e.DatabaseName+"."+e.CommandName)
		mu.Unlock()
	}}
	c, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI()).SetMonitor(monitor))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(ctx) })

	var wg sync.WaitGroup
	got := make([]*patterns.Server, 8)
	for i := range got {
		wg.Go(func() {
			s, err := patterns.Capabilities(ctx, c)
			require.NoError(t, err)
			got[i] = s
		})
	}
	wg.Wait()
	again, err := patterns.Capabilities(ctx, c)
	require.NoError(t, err)
	for _, s := range got {
		require.Same(t, again, s)
	}
	require.Equal(t, []string{"admin.hello", "admin.buildInfo"}, sent)
	require.Equal(t, mongotest.Server().Kind, again.Kind)
	require.Equal(t, mongotest.Server().Features(), again.Features())
}

func TestEnsureIndexesIsIdempotent(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	key := bson.D{{Key: "sensor", Value: 1}, {Key: "at", Value: 1}}
	indexes := []patterns.Index{
		{Collection: db.Collection("a"), Model: mongo.IndexModel{Keys: key}},
		{Collection: db.Collection("b"), Model: mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}},
		{Collection: db.Collection("a"), Model: mongo.IndexModel{Keys: bson.D{{Key: "other", Value: -1}}}},
	}
	counter := mongotest.NewCounter(t, db)
	// Per collection: one listIndexes, then one createIndexes of the
	// missing indexes (one per index without FeatureCreateManyIndexes).
	want := []string{"listIndexes", "createIndexes", "listIndexes", "createIndexes"}
	if !mongotest.Server().Has(patterns.FeatureCreateManyIndexes) {
		want = []string{"listIndexes", "createIndexes", "createIndexes", "listIndexes", "createIndexes"}
	}
	sent := counter.Count(func() { require.NoError(t, patterns.EnsureIndexes(ctx, indexes...)) })
	require.Equal(t, want, sent)
	// Again: every index exists, so nothing is created.
	sent = counter.Count(func() { require.NoError(t, patterns.EnsureIndexes(ctx, indexes...)) })
	require.Equal(t, []string{"listIndexes", "listIndexes"}, sent)
	names := func(coll string) []string {
		specs, err := db.Collection(coll).Indexes().ListSpecifications(ctx)
		require.NoError(t, err)
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return out
	}
	require.ElementsMatch(t, []string{"_id_", "sensor_1_at_1", "other_-1"}, names("a"))
	require.ElementsMatch(t, []string{"_id_", "k_1"}, names("b"))

	err := patterns.EnsureIndexes(ctx, patterns.Index{Model: mongo.IndexModel{Keys: key}})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

// An index created by hand with the declared key and options, under
// another name, is the index: EnsureIndexes creates nothing (the server
// would refuse a second one with IndexOptionsConflict). Keys compare
// numbers by value. With other options it names each difference.
func TestEnsureIndexesAcceptsTheSameIndexUnderAnotherName(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("reviews")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "productId", Value: int64(1)}, {Key: "at", Value: -1.0}, {Key: "_id", Value: -1}},
		Options: options.Index().SetName("byProduct").SetUnique(true),
	})
	require.NoError(t, err)
	declared := patterns.Index{Collection: coll, Model: mongo.IndexModel{
		Keys:    bson.D{{Key: "productId", Value: 1}, {Key: "at", Value: -1}, {Key: "_id", Value: -1}},
		Options: options.Index().SetUnique(true),
	}}
	counter := mongotest.NewCounter(t, db)
	sent := counter.Count(func() { require.NoError(t, patterns.EnsureIndexes(ctx, declared)) })
	require.Equal(t, []string{"listIndexes"}, sent)

	declared.Model.Options = options.Index()
	err = patterns.EnsureIndexes(ctx, declared)
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.ErrorContains(t, err, `exists as "byProduct" with other options (unique: has true, declared false)`)

	specs, err := coll.Indexes().ListSpecifications(ctx)
	require.NoError(t, err)
	require.Len(t, specs, 2, "nothing created: _id_ and byProduct")
}
