package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// hookRepo builds a repository with cfg on plan p whose Hook is a new
// Recorder.
func hookRepo(t *testing.T, cfg subset.Config, p subset.Plan) (*subset.Repo[parent, item], *mongotest.Recorder) {
	t.Helper()
	rec := mongotest.NewRecorder(t)
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
		r, rec := hookRepo(t, config(3), p)
		insertParents(t, r.Indexes()[0].Collection.Database(), "a")
		// The first Add to the new parent stamps it (one write more).
		addDocs, updateDocs := int64(7), int64(2)
		rows := []mongotest.Row{
			{Name: "Add", Call: func() error { return r.Add(ctx, "a", five...) }, Docs: addDocs}, // 5 items, the parent
			{Name: "Add", SendsNothing: true, Call: func() error { return r.Add(ctx, "a") }, Docs: mongotest.NoDocs},
			{Name: "Add", Call: func() error { return r.Add(ctx, "missing", item{ID: 50, Score: 1}) }, Docs: mongotest.AnyDocs, Outcome: patterns.ErrNotFound},
			{Name: "Get", Call: func() error { _, err := r.Get(ctx, "a"); return err }, Docs: mongotest.NoDocs},
			{Name: "Get", SendsNothing: true, Call: func() error { _, err := r.Get(ctx, nil); return err }, Docs: mongotest.NoDocs, Outcome: patterns.ErrInvalid},
			{Name: "Count", Call: func() error { _, err := r.Count(ctx, "a"); return err }, Docs: mongotest.NoDocs},
			{Name: "Item", Call: func() error { _, err := r.Item(ctx, "a", 1); return err }, Docs: mongotest.NoDocs},
			{Name: "Item", Call: func() error { _, err := r.Item(ctx, "a", 999); return err }, Docs: mongotest.NoDocs, Outcome: patterns.ErrNotFound},
			{Name: "Page", Call: func() error { _, _, err := r.Page(ctx, "a", subset.Cursor{}, 2); return err }, Docs: mongotest.NoDocs},
			{Name: "All", Call: func() error {
				for _, err := range r.All(ctx, "a") {
					if err != nil {
						return err
					}
				}
				return nil
			}, Docs: mongotest.NoDocs},
			{Name: "All", SendsNothing: true, Call: func() error {
				for _, err := range r.All(ctx, nil) {
					return err
				}
				return nil
			}, Docs: mongotest.NoDocs, Outcome: patterns.ErrInvalid},
			{Name: "Update", Call: func() error { return r.Update(ctx, "a", item{ID: 1, Score: 90}) }, Docs: updateDocs}, // the item, the parent
			{Name: "Update", Call: func() error { return r.Update(ctx, "a", item{ID: 999, Score: 90}) }, Docs: 0, Outcome: patterns.ErrNotFound},
			{Name: "Remove", Call: func() error { return r.Remove(ctx, "a", 2) }, Docs: 2}, // the item, the parent
			{Name: "Rebuild", Call: func() error { return r.Rebuild(ctx, "a") }, Docs: 1},
			{Name: "Rebuild", Call: func() error { return r.Rebuild(ctx, "missing") }, Docs: mongotest.NoDocs, Outcome: patterns.ErrNotFound},
			{Name: "RebuildAll", Call: func() error { _, err := r.RebuildAll(ctx, nil); return err }, Docs: 1},
			{Name: "Delete", Call: func() error { return r.Delete(ctx, "a") }, Docs: 5}, // the parent, 4 items
			{Name: "Delete", Call: func() error { return r.Delete(ctx, "a") }, Docs: 0, Outcome: patterns.ErrNotFound},
		}
		want := patterns.OperationInfo{Package: "subset", Collections: []string{"parents", "items"}}
		want.Plan, want.Features = p.Path()
		rec.RequireRows(t, r, want, rows, "Indexes")
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
		r, rec := hookRepo(t, config(3), p)
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
		rec.RequireConflicts(t, op, 1)
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
		tp.RequireRetried(t, rec, op)
		n, _ := op.Documents()
		// The items once, the stamp of the new parent, then its push or
		// compare-and-set.
		require.Equal(t, int64(7), n, "the items once, and the parent twice")
		requireState(t, r, "a", five, 3)
	})
}

// TestCountedOperationsReport: with Config.CountField, the paths that
// count the items (Count of a parent without a count, which sets it as
// Rebuild does; Add's recomputation; Remove of an item in neither place,
// which checks the count) report their commands as the others do.
func TestCountedOperationsReport(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, counted(3), p)
		insertParents(t, r.Indexes()[0].Collection.Database(), "a")
		for _, row := range []struct {
			name string
			call func() error
			docs int64
		}{
			{"Count", func() error { _, err := r.Count(ctx, "a"); return err }, 2}, // the parent is stamped, and gets its count
			{"Add", func() error { return r.Add(ctx, "a", five...) }, 6},
			{"Count", func() error { _, err := r.Count(ctx, "a"); return err }, -1},
			{"Remove", func() error { return r.Remove(ctx, "a", 999) }, -1},
		} {
			op := rec.RequireReports(t, "subset", row.name, false, row.call)
			n, known := op.Documents()
			if row.docs < 0 {
				require.False(t, known, row.name)
			} else {
				require.Equal(t, row.docs, n, row.name)
			}
		}
	})
}
