package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// hookRepo builds a repository with small()'s configuration on plan p in
// db whose Hook is a new Recorder.
func hookRepo(t *testing.T, db *mongo.Database, p Plan) (*Repo[post, comment], *mongotest.Recorder) {
	t.Helper()
	rec := mongotest.NewRecorder(t)
	cfg := small()
	cfg.Hook = rec
	r, err := New[post, comment](db, cfg)
	require.NoError(t, err)
	ForcePlan(r, p)
	return r, rec
}

// TestEveryOperationReports runs each exported method of Repo once or
// more (a row each, in an order that gives each the state it needs) and
// checks what it reports to the Hook (the package documentation,
// "Observing"; patterns.Hook): one operation, its commands (those the
// monitor saw sent with its context), the plan it took, the documents it
// wrote, and the sentinel of its error.
func TestEveryOperationReports(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r, rec := hookRepo(t, db, p)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		drain := func(items func(func(comment, error) bool)) error {
			for _, err := range items {
				if err != nil {
					return err
				}
			}
			return nil
		}
		rows := []mongotest.Row{
			{Name: "Insert", Call: func() error { _, err := r.Insert(ctx, post{ID: 1}); return err }, Docs: 1},
			{Name: "Insert", SendsNothing: true, Call: func() error { _, err := r.Insert(ctx, post{ID: 0}); return err }, Docs: mongotest.NoDocs, Outcome: patterns.ErrInvalid},
			// The parent takes 3, the overflow documents the others.
			{Name: "Append", Call: func() error { return r.Append(ctx, 1, comments("a", 0, 6)...) }, Docs: mongotest.SomeDocs},
			{Name: "Append", SendsNothing: true, Call: func() error { return r.Append(ctx, 1) }, Docs: mongotest.NoDocs},
			{Name: "Append", Call: func() error { return r.Append(ctx, 99, comments("b", 0, 1)...) }, Docs: mongotest.AnyDocs, Outcome: patterns.ErrNotFound},
			{Name: "Get", Call: func() error { _, _, err := r.Get(ctx, 1); return err }, Docs: mongotest.NoDocs},
			{Name: "Get", Call: func() error { _, _, err := r.Get(ctx, 99); return err }, Docs: mongotest.NoDocs, Outcome: patterns.ErrNotFound},
			{Name: "Items", Call: func() error { return drain(r.Items(ctx, 1)) }, Docs: mongotest.NoDocs},
			{Name: "Items", SendsNothing: true, Call: func() error { return drain(r.Items(ctx, nil)) }, Docs: mongotest.NoDocs, Outcome: patterns.ErrInvalid},
			{Name: "Page", Call: func() error { _, _, err := r.Page(ctx, 1, Cursor{}, 4); return err }, Docs: mongotest.NoDocs},
			{Name: "Count", Call: func() error { _, err := r.Count(ctx, 1); return err }, Docs: mongotest.NoDocs},
			{Name: "Update", Call: func() error { return r.Update(ctx, 1, comment{ID: "a01", Text: "x"}) }, Docs: 1},
			{Name: "Update", Call: func() error { return r.Update(ctx, 1, comment{ID: "a04", Text: "y"}) }, Docs: 1},
			{Name: "Update", Call: func() error { return r.Update(ctx, 1, comment{ID: "zz"}) }, Docs: mongotest.AnyDocs, Outcome: patterns.ErrNotFound},
			{Name: "Remove", Call: func() error { return r.Remove(ctx, 1, "a00") }, Docs: 1},
			{Name: "Remove", Call: func() error { return r.Remove(ctx, 1, "a05") }, Docs: 1},
			{Name: "Remove", Call: func() error { return r.Remove(ctx, 1, "zz") }, Docs: mongotest.AnyDocs, Outcome: patterns.ErrNotFound},
			{Name: "Delete", Call: func() error { return r.Delete(ctx, 1) }, Docs: mongotest.SomeDocs}, // the parent and its overflow documents
			{Name: "Delete", Call: func() error { return r.Delete(ctx, 1) }, Docs: 0, Outcome: patterns.ErrNotFound},
		}
		want := patterns.OperationInfo{Package: "outlier", Collections: []string{"posts", "posts_overflow"}}
		want.Plan, want.Features = p.Path()
		rec.RequireRows(t, r, want, rows, "Config", "Indexes")
	})
}

// TestHookSeesLostCompareAndSet: on the portable plan, Remove reads the
// parent's elements holding the item and pulls them whole, guarded on
// them; another writer's Update of the item, whole, in the window before
// the pull makes it match nothing, and Remove reads again (Remove's
// godoc): the Hook sees the lost compare-and-set, as a conflict counted
// and an EventConflict.
func TestHookSeesLostCompareAndSet(t *testing.T) {
	ctx := context.Background()
	p := PlanFor(mongotest.Portable())
	db := mongotest.DB(t)
	r, rec := hookRepo(t, db, p)
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	_, err := r.Insert(ctx, post{ID: 1})
	require.NoError(t, err)
	require.NoError(t, r.Append(ctx, 1, comments("a", 0, 2)...))
	other, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), small())
	require.NoError(t, err)
	ForcePlan(other, p)
	var otherErr error
	w := mongotest.InWindow(t, db, 0, func(context.Context) {
		otherErr = other.Update(context.Background(), 1, comment{ID: "a01", Text: "changed"})
	}, "update")
	op := rec.RequireReports(t, "outlier", "Remove", false, func() error { return r.Remove(ctx, 1, "a01") })
	w.Close()
	require.True(t, w.Fired())
	require.NoError(t, otherErr)
	rec.RequireConflicts(t, op, 1)
	_, items, err := r.Get(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, comments("a", 0, 1), items)
}

// TestHookSeesRetry: Append's push answered with FerretDB 2.x's
// transient "deadlock detected" (forged by faults.TransientProxy) is sent
// again (Append's godoc): the Hook sees the retry, with the error, and
// counts both attempts.
func TestHookSeesRetry(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		tp := faults.NewTransient(t)
		r, rec := hookRepo(t, tp.Client().Database(db.Name()), p)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		_, err := r.Insert(ctx, post{ID: 1})
		require.NoError(t, err)
		tp.Arm(1) // the push
		op := rec.RequireReports(t, "outlier", "Append", false, func() error { return r.Append(ctx, 1, comments("a", 0, 2)...) })
		tp.RequireRetried(t, rec, op)
		n, _ := op.Documents()
		require.Equal(t, int64(1), n, "the parent, once")
		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, comments("a", 0, 2), items)
	})
}
