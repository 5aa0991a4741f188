package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestUpdateInAddsWindow: an Update of the item that an Add is
// storing, from another client, run whole between the Add's insert and
// its push (push path), demoting the item out of the first Cap.
//
// Promises: subset/doc.go "Writes": "the subset a [Repo.Get] returns is
// the first N items of a linearization of the writes"; "Concurrency":
// "the subset ... is the first N items once the writes end"; issue 34,
// "Done when": after concurrent calls, "the subset is the first Cap of
// All". Add's godoc (subset/add.go): the count after the push "finds an
// item that a concurrent [Repo.Remove] deleted between the insert and the
// push" -- but it counts ids, not versions, so the push of the version
// the Add inserted, after an Update replaced it, goes unseen, and the
// Update's merging compare-and-set (which keeps elements "pushed since")
// or no later write takes it out.
//
// Every order of the two calls gives a subset without item 9 (its stored
// score, 1, ranks it last); once both returned nil, the subset holds it
// with score 100, a version the items collection no longer holds.
func TestUpdateInAddsWindow(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, plan)
		x := item{ID: 9, Score: 100}
		var innerErr error
		w := mongotest.InWindow(t, db, 0, func(ctx context.Context) {
			innerErr = other.Update(ctx, "a", item{ID: 9, Score: 1})
		}, "update")
		addErr := r.Add(ctx, "a", x)
		w.Close()
		require.True(t, w.Fired())
		require.NoError(t, addErr, "Add")
		require.NoError(t, innerErr, "Update")
		requireState(t, r, "a", append(five, item{ID: 9, Score: 1}), 3)
	})
}

// TestRemoveAndAddInAddsWindow: three parties on one item, Add and
// Remove only. A adds x (score 100); between A's insert and its push, B
// removes x and C adds x again with score 1 (both from other clients,
// each call whole). A's push then puts its score-100 version in the
// subset, and its count of the ids pushed finds C's x, so A returns nil.
//
// Promise: issue 34, "Done when": "after concurrent Add(x) and Remove(x)
// the subset is the first Cap of All"; Remove's godoc (subset/change.go):
// "An Add of the same item that overlaps its Remove leaves, once both
// have returned, the item stored or not, as one order of the two calls
// gives, and the subset the first Cap items"; subset/doc.go, Concurrency:
// "the subset ... is the first N items once the writes end". Every order
// of the three calls stores x with score 1 (an Add of a stored id keeps
// the stored version, add.go), which ranks it out of the first 3.
func TestRemoveAndAddInAddsWindow(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		b := otherRepo(t, db, plan)
		c := otherRepo(t, db, plan)
		var removeErr, addErr error
		// The window before A's first update: on the push path its push;
		// on the portable path its compare-and-set.
		w := mongotest.InWindow(t, db, 0, func(ctx context.Context) {
			removeErr = b.Remove(ctx, "a", 9)
			addErr = c.Add(ctx, "a", item{ID: 9, Score: 1})
		}, "update")
		aErr := r.Add(ctx, "a", item{ID: 9, Score: 100})
		w.Close()
		require.True(t, w.Fired())
		require.NoError(t, aErr, "A's Add")
		require.NoError(t, removeErr, "B's Remove")
		require.NoError(t, addErr, "C's Add")
		requireState(t, r, "a", append(five, item{ID: 9, Score: 1}), 3)
	})
}

// otherRepo is a repository like config(3)'s on plan, on a client of its
// own: another writer, as another process would be.
func otherRepo(t *testing.T, db *mongo.Database, plan subset.Plan) *subset.Repo[parent, item] {
	t.Helper()
	r, err := subset.New[parent, item](mongotest.NewClient(t).Database(db.Name()), config(3))
	require.NoError(t, err)
	subset.ForcePlan(r, plan)
	return r
}
