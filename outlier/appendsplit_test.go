package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAppendOfSeveralAcrossDeleteAndInsert pins what append.go's Append
// godoc says of a multi-item Append across a Delete and an Insert of its
// parent:
//
//	"An Append of several items is a sequence of such writes: a
//	[Repo.Delete] of the parent between two of them removes the items
//	written before it, and if the parent is inserted again meanwhile,
//	the Append writes the rest into the new parent (or its overflow) and
//	returns nil"
//
// An Append of x1, x2 writes x1 (into the parent, or into its newest
// overflow document), then, for x2, finds the parent deleted and inserted
// again: it returns nil with x2 alone in the new parent, as after
// Append(x1), Delete, Insert, Append(x2). (Detecting the Delete would
// take another guard on every write of a multi-item Append; the sequence
// is what the repository already does, and what the godoc now says.)
func TestAppendOfSeveralAcrossDeleteAndInsert(t *testing.T) {
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
				require.NoError(t, r.Append(ctx, id, comment{ID: "x1"}, comment{ID: "x2"}))
				require.GreaterOrEqual(t, *updates, at, "the window fired")
				_, items, err := r.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, []string{"x2"}, idsOf(items),
					"x1 written before the Delete, which removed it; x2 after the Insert, into the new parent")
			})
		}
	})
}
