package subset_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAddAndRemoveOfOneItem runs an Add and a Remove of one item at
// once, the second from another client exactly in the window before each
// command of the first (mongotest.OnCommand), and checks what the
// package promises once no write is in flight: the item is stored when
// the Add's insert came after the Remove's delete, and not otherwise, and
// the subset is the first Cap items of the items collection. Issue 34:
// on the push plan, Remove read the first Cap items without the item,
// Add inserted it again and found it still in the subset, so it pushed
// nothing, and Remove's compare-and-set wrote the subset without it, for
// good; and a Remove between an Add's insert and its push left the item
// in the subset, not stored, until a Rebuild.
func TestAddAndRemoveOfOneItem(t *testing.T) {
	x := five[4] // first in the order, in the subset
	cases := []struct {
		name   string
		before []item // stored before
		outer  string // "Add" or "Remove": the call whose commands the other one runs before
	}{
		{"Add in Remove's window", five, "Remove"},
		{"Remove in Add's window", five, "Add"},
		{"Remove in the window of the Add of a new item", without(five, x.ID), "Add"},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for _, c := range cases {
			for at, fired := 0, true; fired; at++ {
				t.Run(fmt.Sprintf("%s, before command %d", c.name, at), func(t *testing.T) {
					fired = false // a setup that fails ends the loop
					ctx := context.Background()
					db := mongotest.DB(t)
					r := newRepo[parent, item](t, db, config(3), plan)
					insertParents(t, db, "a")
					require.NoError(t, r.Add(ctx, "a", c.before...))
					other := otherRepo(t, db, plan)
					add := func(r *subset.Repo[parent, item], ctx context.Context) error { return r.Add(ctx, "a", x) }
					remove := func(r *subset.Repo[parent, item], ctx context.Context) error { return r.Remove(ctx, "a", x.ID) }
					outer, inner := remove, add
					if c.outer == "Add" {
						outer, inner = add, remove
					}
					var innerErr error
					w := mongotest.InWindow(t, db, at, func(ctx context.Context) { innerErr = inner(other, ctx) },
						"insert", "delete", "find", "update")
					outerErr := outer(r, ctx)
					w.Close()
					if fired = w.Fired(); !fired {
						return // past the outer call's last command
					}
					require.NoError(t, outerErr, c.outer)
					// An Add in Remove's window comes before the Remove when the
					// window is before its delete, after it otherwise. A Remove
					// in an Add's window may come before or after the Add (the
					// Add may find the item it met deleted, and insert it
					// again): either way the item is stored or not, and the
					// subset is the first Cap items.
					var stored bool
					if c.outer == "Remove" {
						stored = slices.Contains(w.Sent(), "delete")
						require.NoError(t, innerErr, "Add")
					} else {
						stored = count(t, db.Collection("items"), bson.D{{Key: "_id", Value: x.ID}}) == 1
						if errors.Is(innerErr, patterns.ErrNotFound) {
							require.False(t, slices.Contains(c.before, x) || slices.Contains(w.Sent(), "insert"),
								"Remove: not found, after the Add's insert")
						} else {
							require.NoError(t, innerErr, "Remove")
						}
					}
					want := without(c.before, x.ID)
					if stored {
						want = append(want, x)
					}
					requireState(t, r, "a", want, 3)
				})
			}
		}
	})
}

// theRemove marks the context of the Remove whose commands a test's
// hooks act before.
type theRemove struct{}

// TestRemoveAfterAnAddThatFollowsItsDelete: Remove(x) of an x stored
// nowhere; after its delete matched nothing, and before its read of the
// parent holding x, another client's Add(x) stores x and puts it in the
// subset. Remove found x in the subset, took it for what a failed Remove
// left, and recomputed the subset from the items, which held x: it
// returned nil with x stored and in the subset, which no order of the two
// calls gives (soak seed 11538016981522827133, native, FerretDB 2.7). It
// now deletes x again, and comes after the Add.
func TestRemoveAfterAnAddThatFollowsItsDelete(t *testing.T) {
	x := five[4]
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", without(five, x.ID)...))
		other := otherRepo(t, db, plan)
		var added error
		finds, fired := 0, false
		mongotest.OnCommand(t, db, "find", func(hctx context.Context) {
			if hctx.Value(theRemove{}) == nil {
				return
			}
			// Before the second find of the Remove: the first, after the
			// delete that matched nothing, found no x (srverr.DeleteOne);
			// the second reads the parent holding x.
			if finds++; finds == 2 {
				fired = true
				added = other.Add(context.Background(), "a", x)
			}
		})
		err := r.Remove(context.WithValue(ctx, theRemove{}, true), "a", x.ID)
		require.True(t, fired)
		require.NoError(t, added)
		require.NoError(t, err, "the subset held x at Remove's read")
		require.Zero(t, count(t, db.Collection("items"), bson.D{{Key: "_id", Value: x.ID}}), "Remove returned nil: it deleted x, after the Add")
		requireState(t, r, "a", without(five, x.ID), 3)
	})
}
