package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAttackDriverRetryCounted: patterns/hook.go:207 "Commands is the
// number of commands the operation sent", and mongotest.RequireReports
// "the commands it counted are the commands the monitor saw sent with its
// context". The driver retries a read once after a network error
// (driver v2.10.0 x/mongo/driver/operation.go, retryable reads; the
// MongoDB manual "Retryable Reads": "drivers retry ... once"), so a
// reset before Get's first command makes the driver send it twice, both
// with the operation's context: Commands() must count both.
func TestAttackDriverRetryCounted(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		insertParents(t, db, "a")
		px := faults.New(t)
		rec := mongotest.NewRecorder(t)
		cfg := config(3)
		cfg.Hook = rec
		r := newRepo[parent, item](t, px.Client().Database(db.Name()), cfg, p)
		require.NoError(t, r.Add(ctx, "a", five...))
		for _, step := range []int{1, 2} {
			px.Arm(faults.Fault{Step: step, Place: faults.Before, Kind: faults.Reset})
			op := rec.RequireReports(t, "subset", "Get", false, func() error { _, err := r.Get(ctx, "a"); return err })
			require.True(t, px.Fired())
			require.NoError(t, op.Err)
			t.Logf("step %d: sent %v, counted %d", step, rec.Sent(op), op.Commands())
		}
	})
}
