package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// requirePushPlan skips a test where the server does not take the push
// plan, naming what it lacks.
func requirePushPlan(t *testing.T) {
	t.Helper()
	for _, f := range []patterns.Feature{patterns.FeaturePushModifiers, patterns.FeaturePipelineUpdates, patterns.FeatureSortArray, patterns.FeatureUpdateSizeLimit} {
		mongotest.Require(t, f)
	}
}

// TestPushGuardWhereSortingHasNothingToDo runs the push plan's guarded
// push on every server (its fallback, a recomputation by a pipeline
// update, where the server takes the push plan), FerretDB 1.x included, whose
// $push ignores $sort and $slice: the items arrive in the configured order
// and never exceed the cap, so there is nothing to sort or slice and the
// result does not depend on the modifiers. (TestRoundTrips and the
// property test cover sorting and slicing where the server takes the
// push plan.)
func TestPushGuardWhereSortingHasNothingToDo(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*subset.Repo[parent, item], *mongotest.Counter, *mongo.Database) {
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(10), pushPlan)
		insertParents(t, db, "a")
		return r, mongotest.NewCounter(t, db), db
	}
	a, b, c := item{ID: 1, Score: 30}, item{ID: 2, Score: 20}, item{ID: 3, Score: 10}

	t.Run("four commands", func(t *testing.T) {
		r, n, db := setup(t)
		require.Equal(t, []string{"find", "findAndModify", "insert", "update", "aggregate"}, n.Count(func() { require.NoError(t, r.Add(ctx, "a", a, b)) }),
			"the first Add to a new parent stamps it")
		rev := func() any {
			var p bson.M
			require.NoError(t, db.Collection("parents").FindOne(ctx, bson.D{}).Decode(&p))
			return p["topRev"]
		}
		stamp := rev()
		require.Equal(t, []string{"find", "insert", "update", "aggregate"}, n.Count(func() { require.NoError(t, r.Add(ctx, "a", c)) }))
		requireState(t, r, "a", []item{a, b, c}, 10)
		require.Equal(t, stamp, rev(), "a push leaves the revision alone")
	})
	t.Run("a retry after both steps stores nothing twice", func(t *testing.T) {
		requirePushPlan(t) // the guard misses: a recomputation, a pipeline update
		r, n, _ := setup(t)
		require.NoError(t, r.Add(ctx, "a", a, b))
		// The duplicates are read back, the guard stops the push, and a
		// recomputation sets the subset (a read of the parent, a read of
		// the first Cap items, a compare-and-set on the revision the first
		// Add stamped).
		require.Equal(t, []string{"find", "insert", "find", "update", "find", "find", "update"}, n.Count(func() { require.NoError(t, r.Add(ctx, "a", a, b)) }))
		requireState(t, r, "a", []item{a, b}, 10)
	})
	t.Run("a retry with the ids in another numeric type", func(t *testing.T) {
		requirePushPlan(t) // the guard misses: a recomputation, a pipeline update
		r, n, db := setup(t)
		require.NoError(t, r.Add(ctx, "a", a))
		// The same item, its id now a double: the server finds the
		// duplicate and the guard stops the push; the subset holds it, and
		// a recomputation sets it.
		raw := newRepo[bson.M, bson.M](t, db, config(10), pushPlan)
		require.Equal(t, []string{"find", "insert", "find", "update", "find", "find", "update"}, n.Count(func() {
			require.NoError(t, raw.Add(ctx, "a", bson.M{"_id": float64(a.ID), "score": a.Score}))
		}))
		requireState(t, r, "a", []item{a}, 10)
	})
	t.Run("items some of which the subset holds are recomputed into it", func(t *testing.T) {
		requirePushPlan(t) // the guard misses: a recomputation, a pipeline update
		r, n, _ := setup(t)
		require.NoError(t, r.Add(ctx, "a", a))
		require.Equal(t, []string{"find", "insert", "find", "update", "find", "find", "update"}, n.Count(func() { require.NoError(t, r.Add(ctx, "a", a, b, c)) }))
		requireState(t, r, "a", []item{a, b, c}, 10)
	})
	t.Run("a null subset field is recomputed", func(t *testing.T) {
		requirePushPlan(t) // the recomputation is a pipeline update
		r, n, db := setup(t)
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "n"}, {Key: "top", Value: nil}})
		require.NoError(t, err)
		// The first Add to the new parent stamps it, then its push fails
		// and a recomputation sets the subset.
		require.Equal(t, []string{"find", "findAndModify", "insert", "update", "find", "find", "update"}, n.Count(func() { require.NoError(t, r.Add(ctx, "n", c, a)) }))
		requireState(t, r, "n", []item{a, c}, 10)
	})
	t.Run("a missing parent leaves no items", func(t *testing.T) {
		r, n, _ := setup(t)
		var err error
		require.Equal(t, []string{"find", "delete"}, n.Count(func() { err = r.Add(ctx, "b", a, b) }))
		require.ErrorIs(t, err, patterns.ErrNotFound)
		for it, err := range r.All(ctx, "b") {
			require.NoError(t, err)
			t.Fatalf("orphan item %v", it)
		}
	})
}

// TestPushSortsAndSlices runs where the server takes the push plan: it
// reads back what the push stored, sorted and sliced by the server.
func TestPushSortsAndSlices(t *testing.T) {
	requirePushPlan(t)
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(2), pushPlan)
	insertParents(t, db, "a")
	items := []item{{ID: 1, Score: 1}, {ID: 2, Score: 3}, {ID: 3, Score: 2}, {ID: 4, Score: 3}}
	require.NoError(t, r.Add(ctx, "a", items...))
	var p bson.M
	require.NoError(t, db.Collection("parents").FindOne(ctx, bson.D{}).Decode(&p))
	rev, ok := p["topRev"].(int64)
	require.True(t, ok && rev >= 1<<32 && rev%(1<<32) == 0, "a push leaves the revision alone, at the stamp of the first Add: %v", p["topRev"])
	requireState(t, r, "a", items, 2)
}
