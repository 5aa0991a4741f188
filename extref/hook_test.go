package extref_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// hooked returns the repository of productRefs on db, reporting to rec,
// on plan p, reading 2 target documents per page.
func hooked(t *testing.T, db *mongo.Database, rec patterns.Hook, p extref.Plan) *extref.Ref[ProductRef] {
	t.Helper()
	r, err := extref.New[ProductRef](db, extref.Config{Source: "products", BatchSize: 2, Hook: rec, Targets: []extref.Target{
		{Collection: "carts", Path: "items[].product"},
		{Collection: "featured", Path: "product"},
	}})
	require.NoError(t, err)
	extref.ForcePlan(r, p)
	return r
}

// written sums what counts say was modified.
func written(counts []extref.Count) int64 {
	var n int64
	for _, c := range counts {
		n += c.Modified
	}
	return n
}

// TestEveryOperationReports runs every exported method of Ref with a hook
// (issue 37): each reports one operation, with the commands it sent under
// its context (mongotest.Recorder.RequireReports), the plan it ran, the
// documents it wrote, and its outcome.
func TestEveryOperationReports(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, _ := withCarts(t, 3, 6, p)
		rec := mongotest.NewRecorder(t)
		r := hooked(t, db, rec, p)
		products := db.Collection("products")
		plan, features := p.Path()
		read := func(t *testing.T, op *patterns.Operation) {
			_, known := op.Documents()
			require.False(t, known, "a read reports no documents")
		}
		var progress [][2]int
		watched := error(patterns.ErrUnsupported)
		if has(p, patterns.FeatureChangeStreams) {
			watched = context.DeadlineExceeded // it watched until ctx ended
		}
		rows := []struct {
			name, row    string
			sendsNothing bool
			call         func(ctx context.Context) (int64, error) // documents written, if known
			check        func(t *testing.T, op *patterns.Operation)
			outcome      error
		}{
			{name: "Of", row: "found", call: func(ctx context.Context) (int64, error) { _, err := r.Of(ctx, 1); return -1, err }, check: read},
			{name: "Of", row: "missing", call: func(ctx context.Context) (int64, error) { _, err := r.Of(ctx, 99); return -1, err }, outcome: patterns.ErrNotFound},
			{name: "Of", row: "bad id", sendsNothing: true, call: func(ctx context.Context) (int64, error) { _, err := r.Of(ctx, nil); return -1, err }, outcome: patterns.ErrInvalid},
			{name: "OfMany", row: "found", call: func(ctx context.Context) (int64, error) { _, err := r.OfMany(ctx, []any{1, 2, 1}); return -1, err }, check: read},
			{name: "OfMany", row: "missing", call: func(ctx context.Context) (int64, error) { _, err := r.OfMany(ctx, []any{1, 99}); return -1, err }, outcome: patterns.ErrNotFound},
			{name: "Sync", row: "fresh", call: func(ctx context.Context) (int64, error) { c, err := r.Sync(ctx, 1); return written(c), err }},
			{name: "Sync", row: "stale", call: func(ctx context.Context) (int64, error) {
				rename(t, products, 1, "Renamed")
				c, err := r.Sync(ctx, 1)
				return written(c), err
			}, check: func(t *testing.T, op *patterns.Operation) {
				n, _ := op.Documents()
				require.Positive(t, n, "it rewrote copies")
			}},
			{name: "Sync", row: "missing", call: func(ctx context.Context) (int64, error) { c, err := r.Sync(ctx, 99); return written(c), err }, outcome: patterns.ErrNotFound},
			{name: "Update", row: "synced", call: func(ctx context.Context) (int64, error) {
				c, err := r.Update(ctx, 2, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Updated"}}}})
				return 1 + written(c), err // the source too
			}},
			{name: "Update", row: "missing", call: func(ctx context.Context) (int64, error) {
				c, err := r.Update(ctx, 99, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Updated"}}}})
				return written(c), err
			}, outcome: patterns.ErrNotFound},
			{name: "Update", row: "replacement", sendsNothing: true, call: func(ctx context.Context) (int64, error) {
				c, err := r.Update(ctx, 2, bson.D{{Key: "name", Value: "Updated"}})
				return written(c), err
			}, outcome: patterns.ErrInvalid},
			{name: "Verify", row: "progress", call: func(ctx context.Context) (int64, error) {
				rename(t, products, 3, "Drifted")
				_, err := r.Verify(ctx, extref.ScanOptions{Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }})
				return -1, err
			}, check: func(t *testing.T, op *patterns.Operation) {
				read(t, op)
				// 6 carts and 3 featured documents, 2 per page.
				require.Equal(t, [][2]int{{2, 9}, {4, 9}, {6, 9}, {8, 9}, {9, 9}}, progress)
			}},
			{name: "Verify", row: "two options", sendsNothing: true, call: func(ctx context.Context) (int64, error) {
				_, err := r.Verify(ctx, extref.ScanOptions{}, extref.ScanOptions{})
				return -1, err
			}, outcome: patterns.ErrInvalid},
			{name: "Repair", row: "stale", call: func(ctx context.Context) (int64, error) {
				progress = nil
				reports, err := r.Repair(ctx, extref.ScanOptions{Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }})
				var n int64
				for _, rep := range reports {
					n += rep.Repaired
				}
				return n, err
			}, check: func(t *testing.T, op *patterns.Operation) {
				n, _ := op.Documents()
				require.Positive(t, n, "it repaired copies")
				require.Equal(t, [2]int{9, 9}, progress[len(progress)-1])
			}},
			{name: "Repair", row: "fresh", call: func(ctx context.Context) (int64, error) {
				reports, err := r.Repair(ctx)
				var n int64
				for _, rep := range reports {
					n += rep.Repaired
				}
				return n, err
			}},
			{name: "Watch", row: "own plan", sendsNothing: !has(p, patterns.FeatureChangeStreams), call: func(ctx context.Context) (int64, error) {
				ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
				return -1, r.Watch(ctx, nil)
			}, outcome: watched},
		}
		reported := map[string]bool{}
		for _, row := range rows {
			reported[row.name] = true
			t.Run(row.name+"/"+row.row, func(t *testing.T) {
				var docs int64
				op := rec.RequireReports(t, "extref", row.name, row.sendsNothing, func() (err error) {
					docs, err = row.call(ctx)
					return err
				})
				require.Equal(t, plan, op.Plan, "the plan it ran")
				require.Equal(t, features, op.Features)
				require.Equal(t, []string{"products", "carts", "featured"}, op.Collections)
				require.Equal(t, row.outcome, op.Outcome())
				if docs >= 0 && row.outcome == nil {
					n, known := op.Documents()
					require.True(t, known, "a write reports its documents")
					require.Equal(t, docs, n)
				}
				if row.check != nil {
					row.check(t, op)
				}
			})
		}
		mongotest.RequireEveryOperation(t, r, reported, "Indexes")
	})
}

// TestHookSeesLostGuards: between the portable path's read and its first
// write, another writer removes the first item of two carts, so their
// guarded updates match nothing (TestPortableRereadsMovedElements): the
// operation reports each as a lost compare-and-set, as it happens.
func TestHookSeesLostGuards(t *testing.T) {
	_, db, other := cartsOf(t, portable(), []int{2, 1}, []int{3, 2, 1}, []int{1})
	rec := mongotest.NewRecorder(t)
	r, err := extref.New[ProductRef](db, extref.Config{Source: "products", Hook: rec, Targets: []extref.Target{{Collection: "carts", Path: "items[].product"}}})
	require.NoError(t, err)
	extref.ForcePlan(r, portable())
	rename(t, db.Collection("products"), 1, "New")
	beforeFirstUpdate(t, db, func(context.Context) {
		// Not the operation's context: the other writer's command is not
		// the operation's.
		_, err := other.Collection("carts").UpdateMany(context.Background(), bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}},
			bson.D{{Key: "$pop", Value: bson.D{{Key: "items", Value: -1}}}})
		assert.NoError(t, err)
	})
	op := rec.RequireReports(t, "extref", "Sync", false, func() error {
		_, err := r.Sync(ctx, 1)
		return err
	})
	require.NoError(t, op.Err)
	require.Equal(t, 2, op.Conflicts(), "the guards of carts 1 and 2 lost")
	require.Equal(t, []patterns.Event{{Kind: patterns.EventConflict}, {Kind: patterns.EventConflict}}, rec.Events(op))
	n, _ := op.Documents()
	require.EqualValues(t, 3, n, "each cart written once")
}

// TestHookSeesRetries: Sync's first write fails with FerretDB 2.x's
// transient deadlock (forged by faults.NewTransient) and is sent again:
// the operation reports the retry, with its error, and counts both sends.
func TestHookSeesRetries(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, _ := withCarts(t, 2, 4, p)
		rename(t, db.Collection("products"), 1, "New")
		px := faults.NewTransient(t)
		rec := mongotest.NewRecorder(t)
		r := hooked(t, px.Client().Database(db.Name()), rec, p)
		px.Arm(1)
		op := rec.RequireReports(t, "extref", "Sync", false, func() error {
			_, err := r.Sync(ctx, 1)
			return err
		})
		px.Arm(0)
		require.NoError(t, op.Err)
		require.Equal(t, 1, op.Retries())
		events := rec.Events(op)
		require.Len(t, events, 1)
		require.Equal(t, patterns.EventRetry, events[0].Kind)
		require.ErrorContains(t, events[0].Err, "deadlock")
	})
}
