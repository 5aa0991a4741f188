package subset_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAttackConflictWithoutLostCompareAndSet: patterns/hook.go:103
// "EventConflict: a compare-and-set of the operation lost to a concurrent
// writer (it matched nothing), so the operation reads again and retries,
// up to the bound its documentation gives, after which it returns
// ErrConflict"; patterns/loghook.go:11 "the end of an operation that gave
// up at slog.LevelWarn ("mongopatterns: gave up": its error wraps
// ErrConflict after the bounded attempts". Count with CountField, on a
// parent without a count, sets it (a Rebuild) and reads it again; another
// writer unsets it in between: Count returns ErrConflict at once
// (subset/count.go:75) with no lost compare-and-set reported, no bound
// reached: the hook's Conflicts() is 0 for an operation whose outcome is
// ErrConflict.
func TestAttackConflictWithoutLostCompareAndSet(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, counted(3), p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		other := mongotest.NewClient(t).Database(db.Name())
		var updated atomic.Bool
		mongotest.OnCommand(t, db, "update", func(context.Context) { updated.Store(true) })
		mongotest.OnCommand(t, db, "find", func(context.Context) {
			if updated.Swap(false) {
				_, err := other.Collection("parents").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "n", Value: ""}}}})
				require.NoError(t, err)
			}
		})
		op := rec.RequireReports(t, "subset", "Count", false, func() error { _, err := r.Count(ctx, "a"); return err })
		require.ErrorIs(t, op.Err, patterns.ErrConflict)
		require.Positive(t, op.Conflicts(), "an ErrConflict outcome with no lost compare-and-set reported (sent %v)", rec.Sent(op))
	})
}
