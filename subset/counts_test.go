package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestRoundTrips counts the commands each operation sends, as the godoc
// states them.
func TestRoundTrips(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a")
		c := mongotest.NewCounter(t, db)

		// The first Add to a parent created without a revision stamps it
		// (findAndModify) after its read, before its insert, on every
		// plan.
		add, first := []string{"find", "insert", "update", "aggregate"}, []string{"find", "findAndModify", "insert", "update", "aggregate"}
		if plan != pushPlan {
			add, first = []string{"find", "insert", "find", "update"}, []string{"find", "findAndModify", "insert", "find", "update"}
		}
		remove := []string{"delete", "find", "find", "update"}
		require.Equal(t, first, c.Count(func() { require.NoError(t, r.Add(ctx, "a", five[:4]...)) }), "Add")
		require.Equal(t, add, c.Count(func() { require.NoError(t, r.Add(ctx, "a", five[4])) }), "Add to a full subset")
		require.Equal(t, []string{"find"}, c.Count(func() {
			p, err := r.Get(ctx, "a")
			require.NoError(t, err)
			require.Len(t, p.Top, 3)
		}), "Get")
		require.Equal(t, remove, c.Count(func() { require.NoError(t, r.Remove(ctx, "a", int64(5))) }), "Remove")
		require.Equal(t, []string{"update", "find", "find", "update"}, c.Count(func() { require.NoError(t, r.Update(ctx, "a", item{ID: 1, Score: 99})) }), "Update")
		require.Equal(t, []string{"find", "find", "update"}, c.Count(func() { require.NoError(t, r.Rebuild(ctx, "a")) }), "Rebuild")
		require.Equal(t, []string{"find", "find"}, c.Count(func() {
			page, next, err := r.Page(ctx, "a", subset.Cursor{}, 3)
			require.NoError(t, err)
			require.Len(t, page, 3)
			page, next, err = r.Page(ctx, "a", next, 3)
			require.NoError(t, err)
			require.Len(t, page, 1)
			require.True(t, next.IsZero())
		}), "two Pages")
		require.Equal(t, []string{"find"}, c.Count(func() { require.Len(t, stored(t, r, "a"), 4) }), "All over one batch")
	})
}
