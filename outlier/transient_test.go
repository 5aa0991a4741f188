package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
)

// The transient tests back the promise that every write of the repository
// is sent again after a transient failure that applied nothing (FerretDB
// 2.x's "deadlock detected", which the driver does not retry), through
// faults.TransientProxy, which forges that reply to one write command.

// TestTransientWritesSentAgain fails each write of every Append case, of
// Remove, Delete and Insert, with FerretDB 2.x's transient deadlock, on
// every plan: each operation succeeds, its effect whole.
func TestTransientWritesSentAgain(t *testing.T) {
	t.Parallel() // beside TestFaults
	require.True(t, srverr.Transient(mongo.CommandError{Code: faults.DeadlockCode}), "the forged error is the transient one")
	cfg, _ := small().normalize()
	t.Run("Append", func(t *testing.T) {
		appendPlansAtOnce(t, func(t *testing.T, plan Plan) {
			faults.Concurrently(t, len(appendFaultCases), func(i int) string { return appendFaultCases[i].name }, func(t *testing.T, i int) {
				c := appendFaultCases[i]
				faults.RunTransient(t, faults.NewTransient(t), appendCase(cfg, plan, c.s, c.add))
			})
		})
	})
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, plan Plan) {
		others := []struct {
			name string
			c    faults.Case[*removeFix]
		}{
			{"Remove_c01", removeCase(cfg, plan, "c01")},
			{"Remove_c04", removeCase(cfg, plan, "c04")},
			{"Delete", faults.Case[*removeFix]{
				Prepare: func(t *testing.T, db *mongo.Database) *removeFix {
					seed(t, db, cfg, seededOverflow)
					return &removeFix{t: t, db: db}
				},
				Op: func(ctx context.Context, db *mongo.Database, _ *removeFix) error {
					return repoOn(db, cfg, plan).Delete(ctx, faultParent)
				},
				Check: func(t *testing.T, _ *mongo.Database, f *removeFix) {
					l := readLayout(t, f.db, cfg)
					require.False(t, l.found)
					require.Empty(t, l.docs)
				},
			}},
			{"Insert", faults.Case[*removeFix]{
				Prepare: func(t *testing.T, db *mongo.Database) *removeFix { return &removeFix{t: t, db: db} },
				Op: func(ctx context.Context, db *mongo.Database, _ *removeFix) error {
					_, err := repoOn(db, cfg, plan).Insert(ctx, post{ID: faultParent, Title: "p"})
					return err
				},
				Check: func(t *testing.T, _ *mongo.Database, f *removeFix) {
					l := readLayout(t, f.db, cfg)
					checkLayout(t, cfg, l, true, true)
					require.Empty(t, l.ids())
				},
			}},
		}
		faults.Concurrently(t, len(others), func(i int) string { return others[i].name }, func(t *testing.T, i int) {
			faults.RunTransient(t, faults.NewTransient(t), others[i].c)
		})
	})
}
