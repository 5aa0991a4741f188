package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAttackAppendAcrossReinsertSplits attacks the new promise of
// append.go's Append godoc for a multi-item Append:
//
//	"When it matches nothing because the parent is open (a Remove made
//	room in it, or it was deleted and inserted again), the items go into
//	it, as they would for an Append that began then."
//
// and the test the change added for it (race_test.go,
// TestAppendWhileParentReinserted: "No order of the calls gives that:
// after the Insert the item goes into the open parent"), with the
// package's "Append appends items to the parent, in order" and "a merged
// read never misses an item whose Append returned before the read
// began". An Append of x1, x2 writes x1 (into the old parent, or into its
// newest overflow document), then its close finds the parent deleted and
// inserted again: it returns nil with x2 alone in the new parent, x1 gone
// with the old one. No order of Append(x1, x2), Delete and Insert leaves
// the new parent holding x2 without x1: the Append before the Delete
// leaves it empty, after the Insert it holds both.
func TestAttackAppendAcrossReinsertSplits(t *testing.T) {
	// One database for every plan and a parent per case (a database costs
	// a few hundred milliseconds on FerretDB 2).
	db := mongotest.DB(t)
	indexed, err := New[post, comment](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(context.Background(), indexed.Indexes()...))
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		other := otherRepo(t, db.Name(), small(), p)
		for _, tc := range []struct {
			name   string
			stored int // items appended before: Cap 3, OverflowCap 2
		}{
			{"read open with room for one", 2},
			{"read closed, newest overflow with room for one", 4},
		} {
			parents++
			id := parents
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				_, err := r.Insert(ctx, post{ID: id})
				require.NoError(t, err)
				require.NoError(t, r.Append(ctx, id, comments("c", 0, tc.stored)...))
				// The Append's updates: (native: the push of both, which
				// misses,) the push of x1, the close.
				at := missedPush(p) + 2
				updates := atUpdate(t, db, at, func(hook context.Context) {
					require.NoError(t, other.Delete(hook, id))
					_, err := other.Insert(hook, post{ID: id})
					require.NoError(t, err)
				})
				err = r.Append(ctx, id, comment{ID: "x1"}, comment{ID: "x2"})
				require.GreaterOrEqual(t, *updates, at, "the window fired")
				_, items, gerr := r.Get(ctx, id)
				require.NoError(t, gerr)
				t.Logf("Append returned %v; Get of the new parent: %v", err, idsOf(items))
				if err == nil {
					require.Contains(t, [][]string{{}, {"x1", "x2"}}, idsOf(items),
						"an Append that returned nil: the new parent holds none of its items (the Append before the Delete) or all (after the Insert)")
				}
			})
		}
	})
}
