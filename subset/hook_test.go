package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// hookRepo builds a repository like config(3)'s on plan p whose Hook is
// a new Recorder.
func hookRepo(t *testing.T, p subset.Plan) (*subset.Repo[parent, item], *mongotest.Recorder) {
	t.Helper()
	rec := mongotest.NewRecorder(t)
	cfg := config(3)
	cfg.Hook = rec
	r := newRepo[parent, item](t, mongotest.DB(t), cfg, p)
	return r, rec
}

// TestEveryOperationReports runs each exported method of Repo once (a
// row each, in an order that gives each the state it needs) and checks
// what it reports to the Hook (the package documentation, "Observing";
// patterns.Hook): one operation, its commands (those the monitor saw sent
// with its context), the plan it took, the documents it wrote, and the
// sentinel of its error.
func TestEveryOperationReports(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, p)
		insertParents(t, r.Indexes()[0].Collection.Database(), "a")
		path, features := p.Path()
		const none = -1      // a read: no documents reported
		const unchecked = -2 // the documents differ by plan
		rows := []struct {
			name         string
			sendsNothing bool
			call         func() error
			docs         int64 // none for a read
			outcome      error
		}{
			{name: "Add", call: func() error { return r.Add(ctx, "a", five...) }, docs: 6}, // 5 items, the parent
			{name: "Add", sendsNothing: true, call: func() error { return r.Add(ctx, "a") }, docs: none},
			{name: "Add", call: func() error { return r.Add(ctx, "missing", item{ID: 50, Score: 1}) }, docs: unchecked, outcome: patterns.ErrNotFound},
			{name: "Get", call: func() error { _, err := r.Get(ctx, "a"); return err }, docs: none},
			{name: "Get", sendsNothing: true, call: func() error { _, err := r.Get(ctx, nil); return err }, docs: none, outcome: patterns.ErrInvalid},
			{name: "Count", call: func() error { _, err := r.Count(ctx, "a"); return err }, docs: none},
			{name: "Item", call: func() error { _, err := r.Item(ctx, "a", 1); return err }, docs: none},
			{name: "Item", call: func() error { _, err := r.Item(ctx, "a", 999); return err }, docs: none, outcome: patterns.ErrNotFound},
			{name: "Page", call: func() error { _, _, err := r.Page(ctx, "a", subset.Cursor{}, 2); return err }, docs: none},
			{name: "All", call: func() error {
				for _, err := range r.All(ctx, "a") {
					if err != nil {
						return err
					}
				}
				return nil
			}, docs: none},
			{name: "All", sendsNothing: true, call: func() error {
				for _, err := range r.All(ctx, nil) {
					return err
				}
				return nil
			}, docs: none, outcome: patterns.ErrInvalid},
			{name: "Update", call: func() error { return r.Update(ctx, "a", item{ID: 1, Score: 90}) }, docs: 2}, // the item, the parent
			{name: "Update", call: func() error { return r.Update(ctx, "a", item{ID: 999, Score: 90}) }, docs: 0, outcome: patterns.ErrNotFound},
			{name: "Remove", call: func() error { return r.Remove(ctx, "a", 2) }, docs: 2}, // the item, the parent
			{name: "Rebuild", call: func() error { return r.Rebuild(ctx, "a") }, docs: 1},
			{name: "Rebuild", call: func() error { return r.Rebuild(ctx, "missing") }, docs: none, outcome: patterns.ErrNotFound},
			{name: "RebuildAll", call: func() error { _, err := r.RebuildAll(ctx, nil); return err }, docs: 1},
			{name: "Delete", call: func() error { return r.Delete(ctx, "a") }, docs: 5}, // the parent, 4 items
			{name: "Delete", call: func() error { return r.Delete(ctx, "a") }, docs: 0, outcome: patterns.ErrNotFound},
		}
		reported := map[string]bool{}
		for _, row := range rows {
			reported[row.name] = true
			op := rec.RequireReports(t, "subset", row.name, row.sendsNothing, row.call)
			require.ErrorIs(t, op.Outcome(), row.outcome, "%s: outcome", row.name)
			if row.outcome == nil {
				require.NoError(t, op.Outcome(), "%s: outcome", row.name)
			}
			require.Equal(t, []string{"parents", "items"}, op.Collections, row.name)
			require.Equal(t, path, op.Plan, row.name)
			require.Equal(t, features, op.Features, row.name)
			n, known := op.Documents()
			switch {
			case row.docs == unchecked:
			case row.docs == none:
				require.False(t, known, "%s: a read or a failed check reports no documents (%d)", row.name, n)
			default:
				require.True(t, known, "%s: documents written", row.name)
				require.Equal(t, row.docs, n, "%s: documents written", row.name)
			}
			require.Zero(t, op.Retries(), row.name)
			require.Zero(t, op.Conflicts(), row.name)
		}
		mongotest.RequireEveryOperation(t, r, reported, "Indexes")
	})
}

// TestHookSeesLostCompareAndSet: another writer's Rebuild, whole, in the
// window before a Rebuild's compare-and-set moves the revision, so that
// the compare-and-set matches nothing and the Rebuild reads again (the
// package documentation, "Recomputation"): the Hook sees the lost
// compare-and-set, as a conflict counted and an EventConflict.
func TestHookSeesLostCompareAndSet(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, p)
		var otherErr error
		w := mongotest.InWindow(t, db, 0, func(context.Context) {
			otherErr = other.Rebuild(context.Background(), "a")
		}, "update")
		op := rec.RequireReports(t, "subset", "Rebuild", false, func() error { return r.Rebuild(ctx, "a") })
		w.Close()
		require.True(t, w.Fired())
		require.NoError(t, otherErr)
		require.NoError(t, op.Err)
		require.Equal(t, 1, op.Conflicts())
		require.Equal(t, []patterns.Event{{Kind: patterns.EventConflict}}, rec.Events(op))
		requireState(t, r, "a", five, 3)
	})
}

// TestHookSeesRetry: a write answered with FerretDB 2.x's transient
// "deadlock detected" (forged by faults.TransientProxy) is sent again
// (the package documentation, "Writes"): the Hook sees the retry, with
// the error, and counts both attempts.
func TestHookSeesRetry(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		insertParents(t, db, "a")
		tp := faults.NewTransient(t)
		rec := mongotest.NewRecorder(t)
		cfg := config(3)
		cfg.Hook = rec
		r := newRepo[parent, item](t, tp.Client().Database(db.Name()), cfg, p)
		tp.Arm(1) // the insert of the items
		op := rec.RequireReports(t, "subset", "Add", false, func() error { return r.Add(ctx, "a", five...) })
		_, forged := tp.Counts()
		require.Equal(t, 1, forged)
		require.NoError(t, op.Err)
		require.Equal(t, 1, op.Retries())
		events := rec.Events(op)
		require.Len(t, events, 1)
		require.Equal(t, patterns.EventRetry, events[0].Kind)
		require.True(t, srverr.Transient(events[0].Err), "the event carries the transient error: %v", events[0].Err)
		n, _ := op.Documents()
		require.Equal(t, int64(6), n, "the items once, and the parent")
		requireState(t, r, "a", five, 3)
	})
}
