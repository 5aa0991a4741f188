package subset_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestRandomSequencesKeepTheInvariant applies random sequences of Add,
// Remove and Update, with ids arriving out of order and scores full of
// ties, to a model and to the repository; after each step the items
// collection must equal the model in the configured order, and the subset
// its first Cap items.
func TestRandomSequencesKeepTheInvariant(t *testing.T) {
	const capacity, steps = 4, 120
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		seed := uint64(time.Now().UnixNano())
		mongotest.Detail(t, "seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 0))
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(capacity), plan)
		insertParents(t, db, "a", "b")
		other := []item{{ID: 1000, Score: 3}}
		require.NoError(t, r.Add(ctx, "b", other...))

		model := map[int64]item{}
		fresh := rng.Perm(500) // ids are handed out in random order
		for step := range steps {
			var op string
			switch k := rng.IntN(10); {
			case len(model) == 0 || k < 4:
				n := 1 + rng.IntN(3)
				var batch []item
				for range n {
					id := int64(fresh[0] + 1)
					fresh = fresh[1:]
					batch = append(batch, item{ID: id, Score: rng.Int64N(6)})
				}
				op = fmt.Sprintf("Add %v", batch)
				require.NoError(t, r.Add(ctx, "a", batch...), op)
				for _, it := range batch {
					model[it.ID] = it
				}
			case k < 7:
				id := pick(rng, model)
				if rng.IntN(8) == 0 {
					id = 9999
					op = "Remove of an absent item"
					require.ErrorIs(t, r.Remove(ctx, "a", id), patterns.ErrNotFound, op)
					break
				}
				op = fmt.Sprintf("Remove %d", id)
				require.NoError(t, r.Remove(ctx, "a", id), op)
				delete(model, id)
			default:
				it := model[pick(rng, model)]
				if rng.IntN(3) == 0 {
					it.Body = fmt.Sprintf("edit %d", step)
				} else {
					it.Score = rng.Int64N(6)
				}
				op = fmt.Sprintf("Update %v", it)
				require.NoError(t, r.Update(ctx, "a", it), op)
				model[it.ID] = it
			}
			t.Run(fmt.Sprintf("step %d %s", step, op), func(t *testing.T) {
				requireState(t, r, "a", slices.Collect(maps.Values(model)), capacity)
			})
		}
		requireState(t, r, "b", other, capacity)
	})
}

// pick returns a random id of the model.
func pick(rng *rand.Rand, model map[int64]item) int64 {
	ids := slices.Sorted(maps.Keys(model))
	return ids[rng.IntN(len(ids))]
}

// TestConcurrentAddsToOneParent has 8 goroutines add 50 items each (10
// on the embedded dev server), one at a time, to one parent, while a
// reader checks that the subset never holds more than the cap or one item
// twice. Afterwards the items collection holds every item once and the
// subset is the first Cap; on the portable path, the updates sent stay
// within the bound of the revision protocol, 3 compare-and-sets per Add.
func TestConcurrentAddsToOneParent(t *testing.T) {
	const workers, capacity = 8, 10
	each := mongotest.Scale(50, 10)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(capacity), plan)
		insertParents(t, db, "a")

		var all []item
		for w := range workers {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for k := range each {
				all = append(all, item{ID: int64(w*1000 + k + 1), Score: rng.Int64N(100)})
			}
		}
		counter := mongotest.NewCounter(t, db)
		counter.Reset()
		var writers, reader sync.WaitGroup
		var done atomic.Bool
		errs := make(chan error, workers*each+1)
		for w := range workers {
			writers.Go(func() {
				for _, it := range all[w*each : (w+1)*each] {
					errs <- r.Add(ctx, "a", it)
				}
			})
		}
		var reads, largest atomic.Int64
		reader.Go(func() {
			for !done.Load() {
				p, err := r.Get(ctx, "a")
				if err != nil {
					errs <- err
					return
				}
				seen := map[int64]bool{}
				for _, it := range p.Top {
					if seen[it.ID] {
						errs <- fmt.Errorf("read %d: item %d twice in the subset", reads.Load(), it.ID)
						return
					}
					seen[it.ID] = true
				}
				if n := int64(len(p.Top)); n > largest.Load() {
					largest.Store(n)
				}
				if len(p.Top) > capacity {
					errs <- fmt.Errorf("read %d: the subset holds %d items, more than %d", reads.Load(), len(p.Top), capacity)
					return
				}
				reads.Add(1)
			}
		})
		writers.Wait()
		done.Store(true)
		reader.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		updates := 0
		for _, c := range counter.Commands() {
			if c == "update" {
				updates++
			}
		}
		mongotest.Detail(t, "%d reads during the adds; the largest subset seen held %d items; %d updates for %d adds", reads.Load(), largest.Load(), updates, workers*each)
		if plan != pushPlan {
			require.LessOrEqual(t, updates, 3*workers*each, "at most 3 compare-and-sets per Add, however many writers compete")
		}
		require.Positive(t, reads.Load())
		require.EqualValues(t, capacity, largest.Load())
		requireState(t, r, "a", all, capacity) // all once, in order; the subset is the first 10
	})
}
