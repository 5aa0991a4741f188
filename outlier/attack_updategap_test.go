package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// quote is an item with a field named by a number that holds a list of
// other items (a reply quoting the notes it answers under "1").
type quote struct {
	ID   string     `bson:"_id"`
	Text string     `bson:"text,omitempty"`
	Re   []bson.Raw `bson:"1,omitempty"`
}

// TestAttackUpdateElementGuardArrayCopy: update.go, Update godoc: "The
// element is guarded by its path, Field.<i>, which MongoDB also reads as
// the field named i of any element: the guard could match after a
// concurrent Remove shifted the elements only if another item held, under
// a field named by that index, a value equal to the element read (a copy
// of a whole item, id included)." (and "Two Updates of one item leave
// one of the two, whole"; the package's "an item is stored once").
//
// The gap is wider than stated: an equality on a path whose value is an
// array also matches an array holding the value (manual, "Query an
// Array": "{ <field>: <value> } ... where the array field contains at
// least one element with the specified value"; mongodb/mongo
// src/mongo/db/matcher/path_test.cpp ArrayIndex3 for the field "i" of an
// element), so an item holding, under "1", a list with a copy of the item
// read also lets the guard match. The overflow document's guard
// (updateOverflowFilter, items.<i>: old) has no $size beside it on any
// plan: after a concurrent Remove of the element before it, Update's $set
// overwrites the next item (lost) with the new version of the one it read,
// which is then stored twice, and Update returns nil.
//
// Fixed (update.go, commands.go elementGuard and elementSet): where the
// server has arrayFilters, Update writes the element by its value (exact,
// whatever moved it); elsewhere by its index, guarded on the size read
// too, so that a Remove alone makes it miss. The second row, a Remove and
// an Append in the window, runs where the write is by value: elsewhere the
// Update godoc names it as the one race the guard still lets through.
func TestAttackUpdateElementGuardArrayCopy(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	cfg := Config{Parents: "posts", Field: "comments", Cap: 3, OverflowCap: 3}
	indexed, err := New[post, quote](db, cfg)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, indexed.Indexes()...))
	other, err := New[post, quote](mongotest.NewClient(t).Database(db.Name()), cfg)
	require.NoError(t, err)
	parents := 0
	for _, tc := range []struct {
		name   string
		append bool // the other repository also appends y, into the room the Remove left
		want   []string
	}{
		{"a Remove", false, []string{"p0:", "p1:", "p2:", "a:new", "b:"}},
		{"a Remove and an Append", true, []string{"p0:", "p1:", "p2:", "a:new", "b:", "y:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			appendPlans(t, func(t *testing.T, p Plan) {
				if tc.append && !p.arrayFilters {
					t.Skip("by index: the Update godoc names this race (a Remove and an Append, and an item holding a copy under the index's name)")
				}
				r, err := New[post, quote](db, cfg)
				require.NoError(t, err)
				ForcePlan(r, p)
				ForcePlan(other, p)
				parents++
				id := parents
				_, err = r.Insert(ctx, post{ID: id})
				require.NoError(t, err)
				a, err := bson.Marshal(quote{ID: "a"})
				require.NoError(t, err)
				require.NoError(t, r.Append(ctx, id, quote{ID: "p0"}, quote{ID: "p1"}, quote{ID: "p2"},
					quote{ID: "x"}, quote{ID: "a"}, quote{ID: "b", Re: []bson.Raw{a}}))

				// Remove x from the overflow document just before Update
				// writes it: after Update read the holder, a, at index 1.
				updates, fired := 0, false
				want := 1 // portable: find parent, find holder, update
				if p.arrayFilters {
					want = 2 // native: the update by id, find holder, update
				}
				mongotest.OnCommand(t, db, "update", func(hctx context.Context) {
					if updates++; updates == want && !fired {
						fired = true
						require.NoError(t, other.Remove(hctx, id, "x"))
						if tc.append {
							require.NoError(t, other.Append(hctx, id, quote{ID: "y"}))
						}
					}
				})
				uerr := r.Update(ctx, id, quote{ID: "a", Text: "new"})
				require.True(t, fired, "the Remove ran in the window")
				_, items, err := r.Get(ctx, id)
				require.NoError(t, err)
				var got []string
				for _, it := range items {
					got = append(got, it.ID+":"+it.Text)
				}
				t.Logf("Update: %v; Get: %v", uerr, got)
				require.NoError(t, uerr)
				require.Equal(t, tc.want, got)
			})
		})
	}
}
