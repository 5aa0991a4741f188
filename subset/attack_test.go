package subset_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAttackDeleteRacesManyAdds: 4 goroutines Add to one parent while it
// is deleted. After Delete returns no item is left without its parent,
// and no Add started after Delete returned succeeds.
func TestAttackDeleteRacesManyAdds(t *testing.T) {
	const adders = 4
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		for round := range 3 {
			insertParents(t, db, "a")
			var deleted atomic.Bool
			var started sync.WaitGroup
			var wg sync.WaitGroup
			errc := make(chan error, adders)
			for a := range adders {
				started.Add(1)
				wg.Go(func() {
					for i := 0; ; i++ {
						if i == 2 {
							started.Done()
						}
						after := deleted.Load()
						err := r.Add(ctx, "a", item{ID: int64(round*100000 + a*10000 + i + 1), Score: int64(i)})
						switch {
						case errors.Is(err, patterns.ErrNotFound):
							if after {
								if i < 2 {
									started.Done()
								}
								return
							}
						case err != nil:
							errc <- err
							if i < 2 {
								started.Done()
							}
							return
						case after:
							errc <- fmt.Errorf("adder %d: add %d started after the delete returned: stored", a, i)
							if i < 2 {
								started.Done()
							}
							return
						}
					}
				})
			}
			started.Wait()
			require.NoError(t, r.Delete(ctx, "a"))
			deleted.Store(true)
			wg.Wait()
			close(errc)
			for err := range errc {
				require.NoError(t, err)
			}
			require.Zero(t, count(t, db.Collection("items"), bson.D{}), "round %d: no orphan items", round)
		}
	})
}
