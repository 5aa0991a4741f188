package subset_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// manyItems returns n items with ids from id on, scores spread.
func manyItems(id int64, n int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{ID: id + int64(i), Score: int64((i * 7) % 97)}
	}
	return out
}

// TestAttack50PushOf100And101Items: Add's godoc: "More than 100 items
// ... are put in the subset by a recomputation (a read of the parent and
// the two commands of the portable path's recomputation) in place of the
// push and its count" (maxPushItems: "one command more"). The commands
// of 100 and 101 items, the hook's Commands against what was sent, the
// state at rest.
func TestAttack50PushOf100And101Items(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		var cmds [2][]string
		for k, n := range []int{100, 101} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				insertParents(t, db, "a")
				rec := mongotest.NewRecorder(t)
				cfg := config(3)
				cfg.Hook = rec
				r := newRepo[parent, item](t, db, cfg, p)
				require.NoError(t, r.Add(ctx, "a", item{ID: 1000, Score: 0}), "stamped")
				items := manyItems(1, n)
				c := mongotest.NewCounter(t, db)
				rec.Reset()
				require.NoError(t, r.Add(ctx, "a", items...))
				cmds[k] = c.Commands()
				ops := rec.Ended()
				require.Len(t, ops, 1)
				docs, known := ops[0].Documents()
				t.Logf("%d items: commands %v; hook Commands %d, sent %v, Documents %d (%t)", n, cmds[k], ops[0].Commands(), rec.Sent(ops[0]), docs, known)
				require.Equal(t, len(rec.Sent(ops[0])), ops[0].Commands())
				atRest(t, r, "a", 3)
			})
		}
		if p != portable && cmds[0] != nil && cmds[1] != nil {
			require.Len(t, cmds[1], len(cmds[0])+1, "one command more past 100 items: %v then %v", cmds[0], cmds[1])
		}
	})
}

// TestAttack50RemoveInWindowOf101Add: a Remove of one item of an Add of
// 101 items (the recomputation in place of the push) before each command
// of the Add. Remove's godoc: "An Add of the same item that overlaps its
// Remove leaves, once both have returned, the item stored or not, as one
// order of the two calls gives, and the subset the first Cap items."
func TestAttack50RemoveInWindowOf101Add(t *testing.T) {
	items := manyItems(1, 101)
	x := items[0]
	for _, it := range items {
		if it.Score > x.Score || (it.Score == x.Score && it.ID < x.ID) {
			x = it
		}
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for at, fired := 0, true; fired; at++ {
			t.Run(fmt.Sprintf("before command %d", at), func(t *testing.T) {
				fired = false
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), plan)
				insertParents(t, db, "a")
				require.NoError(t, r.Add(ctx, "a", item{ID: 1000, Score: 0}), "stamped")
				other := otherRepo(t, db, plan)
				var removed error
				w := mongotest.InWindow(t, db, at, func(ctx context.Context) { removed = other.Remove(ctx, "a", x.ID) },
					"insert", "delete", "find", "update", "aggregate")
				err := r.Add(ctx, "a", items...)
				w.Close()
				if fired = w.Fired(); !fired {
					return
				}
				require.NoError(t, err, "Add")
				stored := count(t, db.Collection("items"), bson.D{{Key: "_id", Value: x.ID}}) == 1
				if errors.Is(removed, patterns.ErrNotFound) {
					require.False(t, slices.Contains(w.Sent(), "insert"), "Remove: not found, after the Add's insert")
				} else {
					require.NoError(t, removed, "Remove")
				}
				t.Logf("sent before: %v; Remove: %v; stored: %t", w.Sent(), removed, stored)
				atRest(t, r, "a", 3)
			})
		}
	})
}

// TestAttack50RemoveOfAGhostCommands: Remove's godoc: a Remove that
// finds the item stored nowhere and the subset holding it "deletes it
// again ... and reads the parent (three commands more: the delete, the
// find of the item that follows a delete that matched nothing, and the
// read ...)", on top of "four commands: deleteOne, a read of the
// parent's revision, a find of the first Cap items and the
// compare-and-set" and "A delete that matches nothing is checked with a
// find of the item (one command more)". The hook's Commands and
// Documents against what a monitor saw.
func TestAttack50RemoveOfAGhostCommands(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		insertParents(t, db, "a")
		rec := mongotest.NewRecorder(t)
		cfg := config(3)
		cfg.Hook = rec
		r := newRepo[parent, item](t, db, cfg, p)
		require.NoError(t, r.Add(ctx, "a", five...))
		x := five[4]
		_, err := db.Collection("items").DeleteOne(ctx, bson.D{{Key: "_id", Value: x.ID}})
		require.NoError(t, err, "an earlier Remove failed after its delete")
		c := mongotest.NewCounter(t, db)
		rec.Reset()
		require.NoError(t, r.Remove(ctx, "a", x.ID))
		ops := rec.Ended()
		require.Len(t, ops, 1)
		docs, known := ops[0].Documents()
		t.Logf("commands %v; hook Commands %d sent %v Documents %d (%t)", c.Commands(), ops[0].Commands(), rec.Sent(ops[0]), docs, known)
		require.Equal(t, len(rec.Sent(ops[0])), ops[0].Commands())
		require.Equal(t, []string{"delete", "find", "find", "delete", "find", "find", "update"}, c.Commands(),
			"four, the find after the delete, two more (the delete again and its find; no second read of the parent when it finds nothing)")
		requireState(t, r, "a", without(five, x.ID), 3)
	})
}

// TestAttack50RemoveOfAGhostInWindows: Remove(x) of an x in the subset
// and stored nowhere (an earlier Remove failed after its delete), with
// another client's call before each of its commands: an Add of x, an
// Update of x, a Delete of the parent then its creation again and an Add
// of x. Remove's godoc: "It returns ErrNotFound when the item is in
// neither place"; the package's: at rest, the subset is the first Cap
// items; an Add and a Remove of one item that overlap leave it stored or
// not, as one order gives.
func TestAttack50RemoveOfAGhostInWindows(t *testing.T) {
	x := five[4]
	inners := []string{"add", "update", "recreate+add"}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for _, inner := range inners {
			for at, fired := 0, true; fired; at++ {
				t.Run(fmt.Sprintf("%s before command %d", inner, at), func(t *testing.T) {
					fired = false
					ctx := context.Background()
					db := mongotest.DB(t)
					r := newRepo[parent, item](t, db, config(3), plan)
					insertParents(t, db, "a")
					require.NoError(t, r.Add(ctx, "a", five...))
					_, err := db.Collection("items").DeleteOne(ctx, bson.D{{Key: "_id", Value: x.ID}})
					require.NoError(t, err)
					other := otherRepo(t, db, plan)
					odb := mongotest.NewClient(t).Database(db.Name())
					var innerErr error
					w := mongotest.InWindow(t, db, at, func(ictx context.Context) {
						switch inner {
						case "add":
							innerErr = other.Add(ictx, "a", x)
						case "update":
							innerErr = other.Update(ictx, "a", item{ID: x.ID, Score: 99})
						case "recreate+add":
							if err := other.Delete(ictx, "a"); err != nil {
								innerErr = err
								return
							}
							_, err := odb.Collection("parents").InsertOne(ictx, bson.D{{Key: "_id", Value: "a"}})
							require.NoError(t, err)
							innerErr = other.Add(ictx, "a", x)
						}
					}, "insert", "delete", "find", "update", "aggregate")
					err = r.Remove(ctx, "a", x.ID)
					w.Close()
					if fired = w.Fired(); !fired {
						return
					}
					stored := count(t, db.Collection("items"), bson.D{{Key: "_id", Value: x.ID}}) == 1
					t.Logf("sent before: %v; Remove: %v; %s: %v; x stored: %t", w.Sent(), err, inner, innerErr, stored)
					if err != nil {
						require.ErrorIs(t, err, patterns.ErrNotFound)
					}
					atRest(t, r, "a", 3)
				})
			}
		}
	})
}

// TestAttack50HistoriesModel: rows for the history model's changes of
// 6909531 and d95b634 (an Add of several that returned nil taken item by
// item; the cleaned marker; a Remove's ErrNotFound dropping ghosts),
// against the package documentation ("the subset a Get returns is the
// first N items of a linearization of the writes, each item taking
// effect within its call") and the godoc.
func TestAttack50HistoriesModel(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	y := item{ID: 4, Parent: "p1", Score: 5}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	get := func(subset string, call int64) porcupine.Operation {
		return op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: subset}, call, call+1)
	}
	addXY := op(sop{op: "add", parent: "p1", items: []item{x, y}}, sout{res: "ok"}, 0, 100)
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		// Each item, once in effect, stays until a write takes it out.
		{Name: "y then x without y, during an Add of both", History: []porcupine.Operation{addXY, get("4:5,", 10), get("2:3,", 20)}},
		{Name: "x missing after an Add of x and y returned", History: []porcupine.Operation{addXY, get("4:5,", 110)}},
		{Name: "both after an Add of x and y returned", History: []porcupine.Operation{addXY, get("4:5,2:3,", 110)}, OK: true},
		// Add's godoc: an item stored under the parent already "keeps its
		// stored version".
		{Name: "an Add of two, one stored already, keeps its version", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 1),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}, y}}, sout{res: "ok"}, 10, 20),
			get("4:5,2:3,", 30),
		}, OK: true},
		// Remove's godoc: "It returns ErrNotFound when the item is in
		// neither place": x not yet in effect at the Remove, so in effect
		// after it, and stored when the Add has returned.
		{Name: "x not found during an Add of x and y, then missing", History: []porcupine.Operation{
			addXY, op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 10, 20), get("4:5,", 110),
		}},
		{Name: "x not found during an Add of x and y, then there", History: []porcupine.Operation{
			addXY, op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 10, 20), get("4:5,2:3,", 110),
		}, OK: true},
		// A ghost of an overlap (Remove's godoc: "While they run, a reader
		// of the subset may see the item there"), then a Remove that
		// finds x in neither place: a Get after it must not see x.
		{Name: "a ghost seen after a Remove found it in neither place", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 50),
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "ok"}, 1, 5),
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 60, 61),
			get("2:3,", 70),
		}},
	})
}

// TestAttack50UndoAcrossIDBatches: Add's godoc: "Items past 32 MiB or
// 10,000 items are inserted with one insertMany per 32 MiB or 10,000
// items (one command more each), and the reads and deletes that name
// their ids (below) are sent per 8 MiB or 10,000 ids", and an id taken by
// another parent is bad input: Add "deletes the items it inserted" and
// returns ErrInvalid. 10,001 items, the last one's id another parent's:
// two insertManys, the undo in two deletes; the hook's Commands and
// Documents against what was sent.
func TestAttack50UndoAcrossIDBatches(t *testing.T) {
	if os.Getenv("MONGOPATTERNS_SOAK") == "" {
		t.Skip("skipped: a long form (10,001 items), run with MONGOPATTERNS_SOAK set; TestInsertBatches checks the batches")
	}
	ctx := context.Background()
	db := mongotest.DB(t)
	insertParents(t, db, "a", "b")
	rec := mongotest.NewRecorder(t)
	cfg := config(3)
	cfg.Hook = rec
	r := newRepo[parent, item](t, db, cfg, portable)
	require.NoError(t, r.Add(ctx, "a", item{ID: -1, Score: 0}), "stamped")
	n := subset.InsertBatchCount + 1
	_, err := db.Collection("items").InsertOne(ctx, bson.D{{Key: "_id", Value: int64(n)}, {Key: "parent", Value: "b"}, {Key: "score", Value: 1}})
	require.NoError(t, err)
	items := manyItems(1, n)
	c := mongotest.NewCounter(t, db)
	rec.Reset()
	err = r.Add(ctx, "a", items...)
	ops := rec.Ended()
	require.Len(t, ops, 1)
	docs, known := ops[0].Documents()
	t.Logf("err %v; commands %v; hook Commands %d sent %v; Documents %d (%t)", err, c.Commands(), ops[0].Commands(), rec.Sent(ops[0]), docs, known)
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.Equal(t, int64(2), count(t, db.Collection("items"), bson.D{}), "the stamp's item and b's: every item inserted deleted")
	require.Equal(t, len(rec.Sent(ops[0])), ops[0].Commands())
	require.Equal(t, int64(2*(n-1)), docs, "the 10,000 inserted and the 10,000 deleted")
}

// TestAttack50ModelRecreatedAddOfTwo: Add's godoc, of a parent deleted
// (and created again) during an Add: "the Add took effect before the
// deletion ..., so it returns nil, after deleting the items it inserted,
// which go with the parent"; when that deletion deleted some and the
// parent was created again, "Add runs again on that parent, and returns
// once its items are stored there and in its subset, taking effect after
// the creation". Either way its items go together: all gone with the old
// parent, or all stored under the new one. Since 6909531 the model takes
// an Add of several that returned nil item by item, each part free to
// take effect on either side of the Delete: it accepts one item of the
// Add under the new parent and the other gone, with no other call on it.
func TestAttack50ModelRecreatedAddOfTwo(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	y := item{ID: 4, Parent: "p1", Score: 5}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	h := func(after string) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x, y}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 10, 20),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 30, 40),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: after}, 110, 111),
		}
	}
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		{Name: "both under the new parent", History: h("4:5,2:3,"), OK: true},
		{Name: "neither: gone with the old parent", History: h(""), OK: true},
		{Name: "y under the new parent, x gone", History: h("4:5,")},
		{Name: "x under the new parent, y gone", History: h("2:3,")},
	})
}

// TestAttack50ModelCleanedAfterTheAddReturned: Add's godoc: "when a
// parent is deleted and created again during an Add, and another call
// stores an item with the same id under the new parent meanwhile, that
// item may be deleted and stored again as this Add has it"; and an
// Add overlapping such an Add may store its own version "between that
// Add's clean-up and its insert again, which keeps it" (the model's
// cleaned marker, d95b634). Both happen before the recreated Add
// returns. Here a Get after the recreated Add returned sees its version
// (so its insert again is done), and later the overlapping Add's version
// replaces it with no call in flight that could delete it: Add "is not an
// upsert", an item stored under the parent "keeps its stored version".
func TestAttack50ModelCleanedAfterTheAddReturned(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	h := func(second string) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 10, 20),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 30, 40),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 90, 150),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 105, 106),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: second}, 160, 161),
		}
	}
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		{Name: "the recreated Add's version kept", History: h("2:3,"), OK: true},
		{Name: "the other Add's version after the recreated Add returned with its own", History: h("2:1,")},
	})
}

// TestAttack50TwoRemovesAndCount: two Removes of one stored item, the
// second before each command of the first, with Config.CountField.
// Remove's godoc: "of two Removes of one item that overlap, both may
// return nil"; at least one deleted it, so at least one returns nil;
// "It returns ErrNotFound when the item is in neither place". At rest the
// item is stored nowhere, the subset is the first Cap items, and the
// count field the number of items.
func TestAttack50TwoRemovesAndCount(t *testing.T) {
	x := five[4]
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for at, fired := 0, true; fired; at++ {
			t.Run(fmt.Sprintf("before command %d", at), func(t *testing.T) {
				fired = false
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[countedParent, item](t, db, counted(3), plan)
				insertParents(t, db, "a")
				require.NoError(t, r.Add(ctx, "a", five...))
				odb := mongotest.NewClient(t).Database(db.Name())
				other, err := subset.New[countedParent, item](odb, counted(3))
				require.NoError(t, err)
				subset.ForcePlan(other, plan)
				var innerErr error
				w := mongotest.InWindow(t, db, at, func(ictx context.Context) { innerErr = other.Remove(ictx, "a", x.ID) },
					"insert", "delete", "find", "update", "aggregate", "count")
				err = r.Remove(ctx, "a", x.ID)
				w.Close()
				if fired = w.Fired(); !fired {
					return
				}
				t.Logf("sent before: %v; outer: %v; inner: %v", w.Sent(), err, innerErr)
				require.False(t, err != nil && innerErr != nil, "one of them deleted x")
				for _, e := range []error{err, innerErr} {
					if e != nil {
						require.ErrorIs(t, e, patterns.ErrNotFound)
					}
				}
				require.Zero(t, count(t, db.Collection("items"), bson.D{{Key: "_id", Value: x.ID}}))
				requireCount(t, r, "a", 4)
				p, err := r.Get(ctx, "a")
				require.NoError(t, err)
				want := ranked(withParentIn("a", without(five, x.ID)))[:3]
				require.Equal(t, want, p.Top)
			})
		}
	})
}

// TestAttack50ParentRecreatedBetweenInsertBatches: an Add of 4 items in
// 4 insertManys (batches of 1,500 bytes); before the n-th insertMany,
// another client deletes the parent (and creates it again). Add's godoc:
// "the Add took effect before the deletion ..., so it returns nil,
// after deleting the items it inserted, which go with the parent"; if
// the parent was created again, "Add runs again on that parent, and
// returns once its items are stored there and in its subset". Its items
// go together: all stored, or none; no orphan left; the subset the first
// Cap items at rest.
func TestAttack50ParentRecreatedBetweenInsertBatches(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, again := range []bool{false, true} {
			for n := int32(2); n <= 4; n++ {
				t.Run(fmt.Sprintf("again %t before insert %d", again, n), func(t *testing.T) {
					ctx := context.Background()
					db := mongotest.DB(t)
					r := newRepo[parent, item](t, db, config(3), p)
					subset.SetInsertBatchBytes(r, 1_500)
					insertParents(t, db, "a")
					odb := mongotest.NewClient(t).Database(db.Name())
					other, err := subset.New[parent, item](odb, config(3))
					require.NoError(t, err)
					subset.ForcePlan(other, p)
					ran := onNth(t, db, "insert", n, func(ictx context.Context) {
						require.NoError(t, other.Delete(ictx, "a"))
						if again {
							_, err := odb.Collection("parents").InsertOne(ictx, bson.D{{Key: "_id", Value: "a"}})
							require.NoError(t, err)
						}
					})
					items := bigItems(1, 4, 1000)
					err = r.Add(ctx, "a", items...)
					require.True(t, ran())
					left := count(t, db.Collection("items"), bson.D{})
					t.Logf("Add: %v; items left: %d", err, left)
					require.NoError(t, err, "the Add found its parent")
					if !again {
						require.Zero(t, left, "the items go with the parent")
						return
					}
					require.Contains(t, []int64{0, 4}, left, "all or none")
					atRest(t, r, "a", 3)
				})
			}
		}
	})
}

// TestAttack50UpdateInWindowOf101Add: an Update of one item of an Add of
// 101 items (the recomputation in place of the push), before each command
// of the Add. Update returns nil (the item stored then) or ErrNotFound
// (before the Add's insert); at rest the item holds the Update's version
// when it returned nil, and the subset is the first Cap items.
func TestAttack50UpdateInWindowOf101Add(t *testing.T) {
	items := manyItems(1, 101)
	x := items[5]
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for at, fired := 0, true; fired; at++ {
			t.Run(fmt.Sprintf("before command %d", at), func(t *testing.T) {
				fired = false
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), plan)
				insertParents(t, db, "a")
				require.NoError(t, r.Add(ctx, "a", item{ID: 1000, Score: 0}), "stamped")
				other := otherRepo(t, db, plan)
				var updated error
				w := mongotest.InWindow(t, db, at, func(ctx context.Context) { updated = other.Update(ctx, "a", item{ID: x.ID, Score: 500}) },
					"insert", "delete", "find", "update", "aggregate")
				err := r.Add(ctx, "a", items...)
				w.Close()
				if fired = w.Fired(); !fired {
					return
				}
				require.NoError(t, err, "Add")
				t.Logf("sent before: %v; Update: %v", w.Sent(), updated)
				all := atRest(t, r, "a", 3)
				if updated == nil {
					require.Contains(t, all, item{ID: x.ID, Parent: "a", Score: 500})
				} else {
					require.ErrorIs(t, updated, patterns.ErrNotFound)
					require.False(t, slices.Contains(w.Sent(), "insert"), "not found after the insert")
				}
			})
		}
	})
}
