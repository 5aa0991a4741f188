package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
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

// TestAddSendsAgainOnlyTheStatementsThatFailed: FerretDB 2.x answers an
// unordered insertMany one of whose statements PostgreSQL chose as a
// deadlock's victim with that statement's write error, the others
// applied (forged here: faults.TransientProxy.ArmPartial). Add sends
// again the failed statement alone: sent again whole, the insert stored
// once more an item that a Remove deleted between the two sends, after
// that Remove had returned nil, so that the item stayed stored and in the
// subset (soak seed 16516763299255108337, native, FerretDB 2.7). Every
// plan.
func TestAddSendsAgainOnlyTheStatementsThatFailed(t *testing.T) {
	t.Parallel() // beside TestFaults
	other := otherWriter(t)
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		stored := item{ID: 1, Score: 1}
		seed(t, db, seedParent{id: "a", items: []item{stored}})
		tp := faults.NewTransient(t)
		r := faultRepo(tp.Client().Database(db.Name()), p)
		remover := faultRepo(other.Database(db.Name()), p)
		x, y := item{ID: 10, Score: 9}, item{ID: 11, Score: 8}
		inserts := 0
		var removed error
		mongotest.OnCommand(t, db, "insert", func(context.Context) {
			if inserts++; inserts == 2 { // the insert sent again after the deadlock
				removed = remover.Remove(ctx, "a", x.ID)
			}
		})
		tp.ArmPartial()
		require.NoError(t, r.Add(ctx, "a", x, y))
		_, forged := tp.Counts()
		require.Equal(t, 1, forged, "the insert's last statement failed with a deadlock")
		require.Equal(t, 2, inserts, "the failed statement was sent again")
		require.NoError(t, removed, "the Remove deleted x, which the first send stored")
		s := readSnapshot(t, db, "a")
		require.True(t, s.found)
		want := []item{stored, y}
		require.Equal(t, byID("a", want), s.items, "x stays removed: the Remove came after the Add's insert of it")
		requireSubset(t, "a", s, want)
	})
}
