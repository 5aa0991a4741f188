package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestTransientWritesSentAgain fails each write of every change case
// (Add, Remove, Update, Rebuild), of an Add to a parent deleted under it
// (whose last write takes its items back), of RebuildAll and of Delete with
// FerretDB 2.x's transient "deadlock detected" (a forged reply, see
// faults.TransientProxy), on every plan: each write is sent again, once,
// and the operation succeeds, its effect whole, as the package
// documentation promises.
func TestTransientWritesSentAgain(t *testing.T) {
	t.Parallel() // beside TestFaults
	require.True(t, srverr.Transient(mongo.CommandError{Code: faults.DeadlockCode}), "the forged error is the transient one")
	cases := changeCases()
	other := otherWriter(t)
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		others := []struct {
			name string
			run  func(t *testing.T, tp *faults.TransientProxy)
		}{
			{"RebuildAll", func(t *testing.T, tp *faults.TransientProxy) {
				parents := []seedParent{{id: "a", items: five, bare: true}, {id: "b", items: shifted(five[:4], 100), subset: []item{{ID: 999, Score: 99}}, rev: 7}}
				faults.RunTransient(t, tp, faults.Case[struct{}]{
					Reuse:   true,
					Prepare: func(t *testing.T, db *mongo.Database) struct{} { seed(t, db, parents...); return struct{}{} },
					Op: func(ctx context.Context, db *mongo.Database, _ struct{}) error {
						n, err := faultRepo(db, p).RebuildAll(ctx, nil)
						if err == nil && n != len(parents) {
							t.Errorf("RebuildAll rebuilt %d parents; want %d", n, len(parents))
						}
						return err
					},
					Check: func(t *testing.T, db *mongo.Database, _ struct{}) {
						for _, sp := range parents {
							requireSettled(t, db, sp.id, sp.items, sp.revision()+1)
						}
					},
				})
			}},
			{"AddDeletedParent", func(t *testing.T, tp *faults.TransientProxy) {
				faults.RunTransient(t, tp, addDeletedParentCase(other, p))
			}},
			{"Delete", func(t *testing.T, tp *faults.TransientProxy) {
				faults.RunTransient(t, tp, faults.Case[struct{}]{
					Reuse: true,
					Prepare: func(t *testing.T, db *mongo.Database) struct{} {
						seed(t, db, seedParent{id: "a", items: five})
						return struct{}{}
					},
					Op: func(ctx context.Context, db *mongo.Database, _ struct{}) error {
						return faultRepo(db, p).Delete(ctx, "a")
					},
					Check: func(t *testing.T, db *mongo.Database, _ struct{}) {
						s := readSnapshot(t, db, "a")
						require.False(t, s.found)
						require.Empty(t, s.items)
					},
				})
			}},
		}
		n := len(cases) + len(others)
		faults.Concurrently(t, n, func(i int) string {
			if i < len(cases) {
				return cases[i].name
			}
			return others[i-len(cases)].name
		}, func(t *testing.T, i int) {
			tp := faults.NewTransient(t)
			if i < len(cases) {
				faults.RunTransient(t, tp, changeCase(cases[i], p))
				return
			}
			others[i-len(cases)].run(t, tp)
		})
	})
}
