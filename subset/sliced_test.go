package subset_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAddOfAnItemThePushSlicesInARecomputationsWindow: a Remove, an
// Update or a Rebuild that drops an element of a full subset
// recomputes it; another client's Add of an item that ranks below every
// element of the subset, but above the item the recomputation reads to
// fill the place, runs in the window before each of the recomputation's
// commands. On the push plan, a push that lands between the
// recomputation's read of the items and its compare-and-set sorts the
// item out of the full subset ($slice), and the merge, which keeps what
// pushes left in the subset, never saw it: the subset lost an item it
// ranks in, for good (soak seed 10766857888810907628, native, FerretDB
// 2.7: subset {5:0}, items {5:0, 1:0}, Cap 2). Whatever the window, once
// both calls return the subset is the first Cap items.
func TestAddOfAnItemThePushSlicesInARecomputationsWindow(t *testing.T) {
	y := item{ID: 6, Score: 25} // below 3 (30), above 2 (20)
	cases := []struct {
		name   string
		outer  func(r *subset.Repo[parent, item], ctx context.Context) error
		before []item
		want   []item // the items once both return
		prune  bool   // delete the first item from the items collection alone, before
	}{
		{"Remove of the first", func(r *subset.Repo[parent, item], ctx context.Context) error { return r.Remove(ctx, "a", int64(5)) },
			five, append(without(five, 5), y), false},
		{"Update of the first to the last place", func(r *subset.Repo[parent, item], ctx context.Context) error {
			return r.Update(ctx, "a", item{ID: 5, Score: 5})
		}, five, append(without(five, 5), item{ID: 5, Score: 5}, y), false},
		{"Rebuild of a subset holding an item stored nowhere", func(r *subset.Repo[parent, item], ctx context.Context) error {
			return r.Rebuild(ctx, "a")
		}, five, append(without(five, 5), y), true},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for _, c := range cases {
			for at, fired := 0, true; fired; at++ {
				t.Run(fmt.Sprintf("%s, Add before command %d", c.name, at), func(t *testing.T) {
					fired = false
					ctx := context.Background()
					db := mongotest.DB(t)
					r := newRepo[parent, item](t, db, config(3), plan)
					insertParents(t, db, "a")
					require.NoError(t, r.Add(ctx, "a", c.before...))
					if c.prune {
						_, err := db.Collection("items").DeleteOne(ctx, bson.D{{Key: "_id", Value: int64(5)}})
						require.NoError(t, err)
					}
					other := otherRepo(t, db, plan)
					var added error
					w := mongotest.InWindow(t, db, at, func(ctx context.Context) { added = other.Add(ctx, "a", y) },
						"insert", "delete", "find", "update", "findAndModify")
					err := c.outer(r, ctx)
					w.Close()
					if fired = w.Fired(); !fired {
						return
					}
					require.NoError(t, err)
					require.NoError(t, added, "Add")
					requireState(t, r, "a", c.want, 3)
				})
			}
		}
	})
}
