package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
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
		path, features := p.Path()
		const (
			none      = -1 // a read: no documents reported
			unchecked = -2 // the documents differ by plan
			some      = -3 // some documents, their number by plan
		)
		drain := func(items func(func(comment, error) bool)) error {
			for _, err := range items {
				if err != nil {
					return err
				}
			}
			return nil
		}
		rows := []struct {
			name         string
			sendsNothing bool
			call         func() error
			docs         int64
			outcome      error
		}{
			{name: "Insert", call: func() error { _, err := r.Insert(ctx, post{ID: 1}); return err }, docs: 1},
			{name: "Insert", sendsNothing: true, call: func() error { _, err := r.Insert(ctx, post{ID: 0}); return err }, docs: none, outcome: patterns.ErrInvalid},
			// The parent takes 3, the overflow documents the others.
			{name: "Append", call: func() error { return r.Append(ctx, 1, comments("a", 0, 6)...) }, docs: some},
			{name: "Append", sendsNothing: true, call: func() error { return r.Append(ctx, 1) }, docs: none},
			{name: "Append", call: func() error { return r.Append(ctx, 99, comments("b", 0, 1)...) }, docs: unchecked, outcome: patterns.ErrNotFound},
			{name: "Get", call: func() error { _, _, err := r.Get(ctx, 1); return err }, docs: none},
			{name: "Get", call: func() error { _, _, err := r.Get(ctx, 99); return err }, docs: none, outcome: patterns.ErrNotFound},
			{name: "Items", call: func() error { return drain(r.Items(ctx, 1)) }, docs: none},
			{name: "Items", sendsNothing: true, call: func() error { return drain(r.Items(ctx, nil)) }, docs: none, outcome: patterns.ErrInvalid},
			{name: "Page", call: func() error { _, _, err := r.Page(ctx, 1, Cursor{}, 4); return err }, docs: none},
			{name: "Count", call: func() error { _, err := r.Count(ctx, 1); return err }, docs: none},
			{name: "Update", call: func() error { return r.Update(ctx, 1, comment{ID: "a01", Text: "x"}) }, docs: 1},
			{name: "Update", call: func() error { return r.Update(ctx, 1, comment{ID: "a04", Text: "y"}) }, docs: 1},
			{name: "Update", call: func() error { return r.Update(ctx, 1, comment{ID: "zz"}) }, docs: unchecked, outcome: patterns.ErrNotFound},
			{name: "Remove", call: func() error { return r.Remove(ctx, 1, "a00") }, docs: 1},
			{name: "Remove", call: func() error { return r.Remove(ctx, 1, "a05") }, docs: 1},
			{name: "Remove", call: func() error { return r.Remove(ctx, 1, "zz") }, docs: unchecked, outcome: patterns.ErrNotFound},
			{name: "Delete", call: func() error { return r.Delete(ctx, 1) }, docs: some}, // the parent and its overflow documents
			{name: "Delete", call: func() error { return r.Delete(ctx, 1) }, docs: 0, outcome: patterns.ErrNotFound},
		}
		reported := map[string]bool{}
		for _, row := range rows {
			reported[row.name] = true
			op := rec.RequireReports(t, "outlier", row.name, row.sendsNothing, row.call)
			require.ErrorIs(t, op.Outcome(), row.outcome, "%s: outcome", row.name)
			if row.outcome == nil {
				require.NoError(t, op.Outcome(), "%s: outcome", row.name)
			}
			require.Equal(t, []string{"posts", "posts_overflow"}, op.Collections, row.name)
			require.Equal(t, path, op.Plan, row.name)
			require.Equal(t, features, op.Features, row.name)
			n, known := op.Documents()
			switch row.docs {
			case unchecked:
			case none:
				require.False(t, known, "%s: a read or a failed check reports no documents (%d)", row.name, n)
			case some:
				require.True(t, known, "%s: documents written", row.name)
				require.Positive(t, n, "%s: documents written", row.name)
			default:
				require.True(t, known, "%s: documents written", row.name)
				require.Equal(t, row.docs, n, "%s: documents written", row.name)
			}
			require.Zero(t, op.Retries(), row.name)
			require.Zero(t, op.Conflicts(), row.name)
		}
		mongotest.RequireEveryOperation(t, r, reported, "Config", "Indexes")
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
	require.NoError(t, op.Err)
	require.Equal(t, 1, op.Conflicts())
	require.Equal(t, []patterns.Event{{Kind: patterns.EventConflict}}, rec.Events(op))
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
		_, forged := tp.Counts()
		require.Equal(t, 1, forged)
		require.NoError(t, op.Err)
		require.Equal(t, 1, op.Retries())
		events := rec.Events(op)
		require.Len(t, events, 1)
		require.Equal(t, patterns.EventRetry, events[0].Kind)
		require.True(t, srverr.Transient(events[0].Err), "the event carries the transient error: %v", events[0].Err)
		n, _ := op.Documents()
		require.Equal(t, int64(1), n, "the parent, once")
		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, comments("a", 0, 2), items)
	})
}
