package subset_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestChangesConvergeUnderSustainedAdds has goroutines add items to one
// parent (a popular product) while others remove and update its items,
// all at once: no operation fails (no ErrConflict: a recomputation does
// not start again because others push, and its compare-and-sets are
// bounded), and afterwards every item is stored once and the subset is
// the first Cap of them.
func TestChangesConvergeUnderSustainedAdds(t *testing.T) {
	const adders, changers, capacity = 4, 3, 5
	each := mongotest.Scale(60, 6)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(capacity), plan)
		insertParents(t, db, "a")

		// Each changer owns items of its own, added first, and removes or
		// updates them one by one while the adders add theirs. The scores
		// are high so that the changes fall in the subset.
		owned := make([][]item, changers)
		var initial []item
		for c := range owned {
			for k := range each {
				it := item{ID: int64(1000*(c+1) + k), Score: int64(100 + (c*each+k)%7)}
				owned[c] = append(owned[c], it)
				initial = append(initial, it)
			}
		}
		require.NoError(t, r.Add(ctx, "a", initial...))

		var wg sync.WaitGroup
		errs := make(chan error, (adders+changers)*each)
		added := make([][]item, adders)
		for a := range adders {
			wg.Go(func() {
				for k := range each {
					it := item{ID: int64(100000*(a+1) + k), Score: int64(50 + (a+k)%60)}
					if err := r.Add(ctx, "a", it); err != nil {
						errs <- fmt.Errorf("Add %d: %w", it.ID, err)
						continue
					}
					added[a] = append(added[a], it)
				}
			})
		}
		final := make([]map[int64]item, changers)
		for c := range changers {
			final[c] = map[int64]item{}
			wg.Go(func() {
				for k, it := range owned[c] {
					if k%2 == 0 {
						if err := r.Remove(ctx, "a", it.ID); err != nil {
							errs <- fmt.Errorf("Remove %d: %w", it.ID, err)
						}
						continue
					}
					it.Score = int64(90 + k%20)
					if err := r.Update(ctx, "a", it); err != nil {
						errs <- fmt.Errorf("Update %d: %w", it.ID, err)
					}
					final[c][it.ID] = it
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		var want []item
		for _, a := range added {
			want = append(want, a...)
		}
		for _, f := range final {
			want = append(want, slices.Collect(maps.Values(f))...)
		}
		requireState(t, r, "a", want, capacity) // each once, in order; the subset is the first Cap
	})
}

// TestChangesConvergeWhileOthersWriteInTheirWindow makes another client
// write to the parent in the window of every compare-and-set of a Remove
// or an Update (between its read of the items and its write): it adds an
// item that enters the subset, recomputes the subset, or both. The
// operation succeeds with at most two compare-and-sets, as documented,
// and the subset is then the first Cap items, the one added in the window
// included. On the portable plan an Add in the window recomputes, which
// makes the write fail once. On the push plan its push into the full
// subset sorts an item out, which the merge could not keep had the
// recomputation not read it (TestAddOfAnItemThePushSlicesInARecomputationsWindow):
// the compare-and-set fails, and the recomputation announces itself at
// its next read; the Add in the next window then finds its push held off
// and recomputes, which makes the write fail once more: one
// compare-and-set more than the bound of two, as documented.
func TestChangesConvergeWhileOthersWriteInTheirWindow(t *testing.T) {
	ops := []struct {
		name   string
		change func(r *subset.Repo[parent, item]) error
		model  func(items []item) []item
	}{
		{"Remove", func(r *subset.Repo[parent, item]) error { return r.Remove(context.Background(), "a", int64(5)) },
			func(items []item) []item { return without(items, 5) }},
		{"Update", func(r *subset.Repo[parent, item]) error {
			return r.Update(context.Background(), "a", item{ID: 1, Score: 45})
		}, func(items []item) []item { return append(without(items, 1), item{ID: 1, Score: 45}) }},
	}
	windows := []struct {
		name          string
		add, rebuild  bool
		casOnPushPlan int // compare-and-sets on the push plan
		casPortable   int // and on the portable one, where an Add recomputes
	}{
		{"an add", true, false, 3, 2},
		{"a recomputation", false, true, 2, 2},
		{"an add and a recomputation", true, true, 2, 1},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for _, op := range ops {
			for _, w := range windows {
				t.Run(op.name+" under "+w.name, func(t *testing.T) {
					ctx := context.Background()
					db := mongotest.DB(t)
					r := newRepo[parent, item](t, db, config(3), plan)
					insertParents(t, db, "a")
					require.NoError(t, r.Add(ctx, "a", five...))
					other := otherRepo(t, db, plan)

					var cas int
					var inWindow []error
					items := slices.Clone(five)
					mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
						// The hook runs before each update r sends (and Update's
						// replaceOne of the item, which is an update too: only
						// the compare-and-sets come after it).
						cas++
						if op.name == "Update" && cas == 1 {
							return // the replaceOne of the item
						}
						if w.add {
							it := item{ID: int64(100 + cas), Score: int64(1000 + cas)}
							inWindow = append(inWindow, other.Add(ctx, "a", it))
							items = append(items, it)
						}
						if w.rebuild {
							inWindow = append(inWindow, other.Rebuild(ctx, "a"))
						}
					})
					require.NoError(t, op.change(r))
					for _, err := range inWindow {
						require.NoError(t, err)
					}
					if op.name == "Update" {
						cas--
					}
					want := w.casPortable
					if plan == pushPlan {
						want = w.casOnPushPlan
					}
					require.Equal(t, want, cas, "compare-and-sets")
					requireState(t, r, "a", op.model(items), 3)
				})
			}
		}
	})
}

// TestRemoveUnderConcurrentUpdates: an item out of the subset that four
// writers keep updating is deleted by Remove, which returns nil. (On
// FerretDB 2.x a deleteOne of a document a concurrent update rewrites
// answers no match and leaves it in place: Remove then found no parent
// holding the item and returned patterns.ErrNotFound, the item still
// stored.)
func TestRemoveUnderConcurrentUpdates(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		for try := range mongotest.Scale(10, 3) {
			id := int64(100 + try)
			require.NoError(t, r.Add(ctx, "a", item{ID: id, Score: 0}))
			wctx, stop := context.WithCancel(ctx)
			var acked atomic.Int64
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for k := 0; wctx.Err() == nil; k++ {
						if r.Update(wctx, "a", item{ID: id, Score: 0, Body: fmt.Sprint(w, k)}) == nil {
							acked.Add(1)
						}
					}
				})
			}
			require.Eventually(t, func() bool { return acked.Load() >= 8 }, time.Minute, time.Millisecond, "the writers update the item")
			err := r.Remove(ctx, "a", id)
			stop()
			wg.Wait()
			require.NoError(t, err, "try %d", try)
			requireState(t, r, "a", five, 3) // the item is gone, the subset as it was
		}
	})
}
