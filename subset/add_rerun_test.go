package subset_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAddRunsAgainOnAParentDeletedAgain: an Add whose parent is deleted
// after its read, created again before its clean-up (so that it runs
// again on the new parent, add.go) and deleted again before that run
// reads it returns nil, as an Add whose parent was deleted once does: it
// took effect before the first deletion, its items deleted since (Add's
// godoc). It returned ErrNotFound, though its items had been stored and
// visible.
func TestAddRunsAgainOnAParentDeletedAgain(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		odb := mongotest.NewClient(t).Database(db.Name())
		parents := odb.Collection("parents")
		del := func(ctx context.Context) {
			_, err := parents.DeleteOne(ctx, bson.D{{Key: "_id", Value: "p"}})
			require.NoError(t, err)
		}
		insertParents(t, db, "p")
		// Before the Add's first update (its push, or its
		// compare-and-set), after its insert: the parent is deleted (by
		// another client).
		onNth(t, db, "update", 1, del)
		// Before the Add's clean-up (its first delete): the parent is
		// created again; before the second find that follows (the read of the
		// Add's new run, after the clean-up's read of the parent), it is
		// deleted again.
		var armed atomic.Bool
		var finds atomic.Int32
		ran := onNth(t, db, "delete", 1, func(ctx context.Context) {
			insertParents(t, odb, "p")
			armed.Store(true)
		})
		mongotest.OnCommand(t, db, "find", func(ctx context.Context) {
			if armed.Load() && finds.Add(1) == 2 {
				del(ctx)
			}
		})
		c := mongotest.NewCounter(t, db)
		var addErr error
		sent := c.Count(func() { addErr = r.Add(ctx, "p", item{ID: 1, Parent: "p", Score: 3}) })
		t.Logf("sent: %v", sent)
		require.NoError(t, addErr, "the Add took effect before the first deletion")
		require.True(t, ran(), "the Add sent its clean-up")
		require.GreaterOrEqual(t, finds.Load(), int32(2), "the Add ran again")
		n, err := odb.Collection("items").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.Zero(t, n, "its items went with the parent")
	})
}
