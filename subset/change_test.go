package subset_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// five are the items of the Remove and Update tests; with a cap of 3 the
// subset holds 5, 4 and 3 (by score), and 2 is next in line.
var five = []item{{ID: 1, Score: 10}, {ID: 2, Score: 20}, {ID: 3, Score: 30}, {ID: 4, Score: 40}, {ID: 5, Score: 50}}

func without(items []item, id int64) []item {
	var out []item
	for _, it := range items {
		if it.ID != id {
			out = append(out, it)
		}
	}
	return out
}

func TestRemove(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		setup := func(t *testing.T) (*subset.Repo[parent, item], *mongoColl) {
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, config(3), plan)
			insertParents(t, db, "a")
			require.NoError(t, r.Add(ctx, "a", five...))
			return r, &mongoColl{db.Collection("items")}
		}
		t.Run("an item of a full subset is replaced by the next", func(t *testing.T) {
			r, _ := setup(t)
			require.NoError(t, r.Remove(ctx, "a", int64(4)))
			requireState(t, r, "a", without(five, 4), 3)
		})
		t.Run("an item outside the subset", func(t *testing.T) {
			r, _ := setup(t)
			require.NoError(t, r.Remove(ctx, "a", int64(1)))
			requireState(t, r, "a", without(five, 1), 3)
		})
		t.Run("down to empty", func(t *testing.T) {
			r, _ := setup(t)
			for _, it := range five {
				require.NoError(t, r.Remove(ctx, "a", it.ID))
			}
			requireState(t, r, "a", nil, 3)
		})
		t.Run("a retry finishes a Remove that failed after its delete", func(t *testing.T) {
			r, items := setup(t)
			_, err := items.DeleteOne(ctx, bson.D{{Key: "_id", Value: 5}})
			require.NoError(t, err)
			require.NoError(t, r.Remove(ctx, "a", int64(5)))
			requireState(t, r, "a", without(five, 5), 3)
			require.ErrorIs(t, r.Remove(ctx, "a", int64(5)), patterns.ErrNotFound, "once done, the item is in neither place")
		})
		t.Run("under a missing parent", func(t *testing.T) {
			r, items := setup(t)
			// An orphan, as a Delete that failed after deleting the parent
			// leaves it: Remove deletes it all the same, and says that there
			// is no parent.
			items.insert(t, withParent("gone", item{ID: 77, Score: 1})...)
			err := r.Remove(ctx, "gone", int64(77))
			require.ErrorIs(t, err, patterns.ErrNotFound)
			require.EqualError(t, err, `subset: Remove: parent "gone": item 77: no such parent: not found`)
			require.Zero(t, count(t, items.Collection, bson.D{{Key: "parent", Value: "gone"}}), "the orphan is deleted")
			require.ErrorIs(t, r.Remove(ctx, "gone", int64(77)), patterns.ErrNotFound, "and a retry finds nothing")
		})
		t.Run("not found", func(t *testing.T) {
			r, _ := setup(t)
			require.ErrorIs(t, r.Remove(ctx, "a", int64(99)), patterns.ErrNotFound)
			require.ErrorIs(t, r.Remove(ctx, "b", int64(1)), patterns.ErrNotFound, "another parent's item")
			require.ErrorIs(t, r.Remove(ctx, "a", bson.M{"$gt": 0}), patterns.ErrInvalid)
			require.ErrorIs(t, r.Remove(ctx, "", int64(1)), patterns.ErrInvalid)
			requireState(t, r, "a", five, 3)
		})
	})
}

func TestUpdate(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		setup := func(t *testing.T) *subset.Repo[parent, item] {
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, config(3), plan)
			insertParents(t, db, "a")
			require.NoError(t, r.Add(ctx, "a", five...))
			return r
		}
		cases := []struct {
			name   string
			update item
		}{
			{"an item enters the subset", item{ID: 1, Score: 45}},
			{"an item leaves it and the next takes its place", item{ID: 5, Score: 5}},
			{"an item moves within it", item{ID: 3, Score: 60}},
			{"an item changes in place", item{ID: 4, Score: 40, Body: "edited"}},
			{"an item changes outside it", item{ID: 2, Score: 20, Body: "edited"}},
			{"a tie is broken by the id", item{ID: 2, Score: 30}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := setup(t)
				require.NoError(t, r.Update(ctx, "a", tc.update))
				want := append(without(five, tc.update.ID), tc.update)
				requireState(t, r, "a", want, 3)
				require.NoError(t, r.Update(ctx, "a", tc.update), "a retry")
				requireState(t, r, "a", want, 3)
			})
		}
		t.Run("rejects", func(t *testing.T) {
			r := setup(t)
			require.ErrorIs(t, r.Update(ctx, "a", item{ID: 99, Score: 1}), patterns.ErrNotFound)
			require.ErrorIs(t, r.Update(ctx, "b", item{ID: 1, Score: 1}), patterns.ErrNotFound, "another parent's item")
			require.ErrorIs(t, r.Update(ctx, "a", item{ID: 1, Score: 1, Parent: "b"}), patterns.ErrInvalid, "moving an item to another parent")
			require.ErrorIs(t, r.Update(ctx, "a", item{Score: 1}), patterns.ErrInvalid, "no id")
			requireState(t, r, "a", five, 3)
		})
	})
}

func TestRebuild(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a", "b", "c")
	// Items loaded without the repository, for a backfill.
	items := &mongoColl{db.Collection("items")}
	items.insert(t, withParent("a", five...)...)
	few := []item{{ID: 11, Score: 1}, {ID: 12, Score: 2}}
	items.insert(t, withParent("b", few...)...)

	require.NoError(t, r.Rebuild(ctx, "a"))
	requireState(t, r, "a", five, 3)
	require.ErrorIs(t, r.Rebuild(ctx, "nope"), patterns.ErrNotFound)
	require.ErrorIs(t, r.Rebuild(ctx, bson.D{}), patterns.ErrInvalid)

	// A new cap, applied to every parent.
	smaller := newRepo[parent, item](t, db, config(2), portable)
	var progress []int
	n, err := smaller.RebuildAll(ctx, func(done int) { progress = append(progress, done) })
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []int{1, 2, 3}, progress)
	requireState(t, smaller, "a", five, 2)
	requireState(t, smaller, "b", few, 2)
	requireState(t, smaller, "c", nil, 2)

	n, err = smaller.RebuildAll(ctx, nil)
	require.NoError(t, err, "a nil progress is fine, and rebuilding is idempotent")
	require.Equal(t, 3, n)
	requireState(t, smaller, "a", five, 2)
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a", "b")
	require.NoError(t, r.Add(ctx, "a", five...))
	require.NoError(t, r.Add(ctx, "b", item{ID: 9, Score: 1}))

	require.NoError(t, r.Delete(ctx, "a"))
	_, err := r.Get(ctx, "a")
	require.ErrorIs(t, err, patterns.ErrNotFound)
	require.Zero(t, count(t, db.Collection("items"), bson.D{{Key: "parent", Value: "a"}}))
	requireState(t, r, "b", []item{{ID: 9, Score: 1}}, 3)
	require.ErrorIs(t, r.Delete(ctx, "a"), patterns.ErrNotFound)
	require.ErrorIs(t, r.Delete(ctx, nil), patterns.ErrInvalid)
}

func TestGet(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	_, err := r.Get(ctx, "a")
	require.ErrorIs(t, err, patterns.ErrNotFound)
	_, err = r.Get(ctx, bson.M{"$ne": nil})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

// TestRebuildAllRebuildsEachParentOnceWhileOthersWrite: RebuildAll
// rebuilds each parent once, while others rewrite the parents it scans
// (a cursor over documents rewritten meanwhile may return them again:
// FerretDB 2 does, and MongoDB can when a document moves), whatever the
// BSON types of the parents' ids.
func TestRebuildAllRebuildsEachParentOnceWhileOthersWrite(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[bson.M, item](t, db, config(3), portable)
	n := mongotest.Scale(400, 120)
	ids := make([]any, n)
	docs := make([]any, n)
	for i := range ids {
		ids[i] = int64(i + 1)
		if i%2 == 1 {
			ids[i] = fmt.Sprintf("p%04d", i)
		}
		docs[i] = bson.D{{Key: "_id", Value: ids[i]}}
	}
	_, err := db.Collection("parents").InsertMany(ctx, docs)
	require.NoError(t, err)

	// The writer rewrites every parent, larger each round, until
	// RebuildAll ends.
	stop := make(chan struct{})
	var rounds int
	var wg sync.WaitGroup
	wg.Go(func() {
		for round := 1; ; round++ {
			for _, id := range ids {
				select {
				case <-stop:
					rounds = round
					return
				default:
				}
				_, err := db.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "pad", Value: strings.Repeat("x", 64*round)}}}})
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
			}
		}
	})
	rebuilt, err := r.RebuildAll(ctx, nil)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	mongotest.Detail(t, "%d parents, %d rounds of the writer", n, rounds)
	require.Equal(t, n, rebuilt, "each parent counted once")
	cur, err := db.Collection("parents").Find(ctx, bson.D{})
	require.NoError(t, err)
	type revised struct {
		ID  any   `bson:"_id"`
		Rev int64 `bson:"topRev"`
	}
	var all []revised
	require.NoError(t, cur.All(ctx, &all))
	var wrong []revised
	for _, p := range all {
		if p.Rev%(1<<32) != 1 {
			wrong = append(wrong, p)
		}
	}
	require.Empty(t, wrong, "each parent rebuilt once: its revision moved once (its low 32 bits; it was stamped first)")
}
