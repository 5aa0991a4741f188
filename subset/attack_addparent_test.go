package subset_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// Attacks on commits 343b382 and f2c1e73 (subset: Add reads its parent
// first; an Add whose parent is deleted after that read returns nil and
// deletes its items).

// atRest asserts the package promise (subset/doc.go:31-33): "So the
// subset is, whenever no write is in flight, exactly the first N items
// that [Repo.All] yields", and returns the stored items.
func atRest(t *testing.T, r *subset.Repo[parent, item], pid string, capacity int) []item {
	t.Helper()
	all := stored(t, r, pid)
	p, err := r.Get(context.Background(), pid)
	require.NoError(t, err, "the parent exists")
	top := ranked(all)[:min(capacity, len(all))]
	if len(top) == 0 {
		top = nil
	}
	got := p.Top
	if len(got) == 0 {
		got = nil
	}
	require.Equal(t, top, got, "at rest, the subset is the first %d items that All yields (All: %v)", capacity, all)
	return all
}

// onNth runs fn before the n-th (from 1) command named name that a
// harness client sends to db, once; it returns whether fn ran.
func onNth(t *testing.T, db *mongo.Database, name string, n int32, fn func(ctx context.Context)) func() bool {
	var seen atomic.Int32
	var ran atomic.Bool
	mongotest.OnCommand(t, db, name, func(ctx context.Context) {
		if seen.Add(1) == n {
			ran.Store(true)
			fn(ctx)
		}
	})
	return ran.Load
}

// TestAttackAddCleanupDeletesAnotherAddsItem: Add's clean-up deletes
// the items of its parent by id ({parent, _id: {$in: ids}}), whoever
// stored them, after it found the parent missing. When the application
// creates the parent again (doc.go:35-36: "The application creates its
// parents as it likes") and another Add stores the same item before the
// clean-up lands, the clean-up deletes that other Add's item, which the
// other Add's push had put in the subset: the subset holds an item the
// items collection does not, at rest, and an Add that returned nil (the
// other one) has its item stored nowhere.
//
// Promises: add.go:87-92 "it returns nil, after deleting the items it
// inserted" (it deletes items it did not insert); add.go:81 "A missing
// parent gives [patterns.ErrNotFound] and leaves no item behind"; doc.go
// 31-33 (the subset is the first N of All whenever no write is in
// flight); doc.go:45-47 "the subset a [Repo.Get] returns is the first N
// items of a linearization of the writes". No order of Delete, the
// creation, the other Add (nil) and this Add leaves x in the subset and
// not stored: whichever Add comes last finds or stores x under the
// re-created parent. Fixed: the clean-up deletes the items stored like
// the Add's, and when it deleted some and then finds the parent, the Add
// runs again on it (add.go, dropThenRecheck).
func TestAttackAddCleanupDeletesAnotherAddsItem(t *testing.T) {
	const capacity = 3
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		rows := []struct {
			name      string
			exists    bool // the parent exists when the Add starts (deleted at its first update)
			wantFirst error
		}{
			{"parent deleted after Add's read, created again before its clean-up", true, nil},
			// The Add's clean-up (of what an earlier attempt may have
			// left) deletes the other Add's x, then finds the parent:
			// it adds x to it, taking effect after the creation
			// (add.go, dropThenRecheck), rather than ErrNotFound.
			{"parent missing at Add's read, created before its clean-up", false, nil},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(capacity), p)
				odb := mongotest.NewClient(t).Database(db.Name())
				other, err := subset.New[parent, item](odb, config(capacity))
				require.NoError(t, err)
				subset.ForcePlan(other, p)
				x := item{ID: 1, Parent: "p", Score: 3}
				if row.exists {
					insertParents(t, db, "p")
					// Before the Add's first update (its push, or its
					// compare-and-set), after its insert: Delete.
					onNth(t, db, "update", 1, func(ctx context.Context) {
						require.NoError(t, other.Delete(ctx, "p"), "Delete")
					})
				}
				// Before the Add's clean-up (its deleteMany): the
				// application creates the parent, another client adds x.
				var otherAdd error
				ran := onNth(t, db, "delete", 1, func(ctx context.Context) {
					insertParents(t, odb, "p")
					otherAdd = other.Add(ctx, "p", x)
				})
				err = r.Add(ctx, "p", x)
				require.True(t, ran(), "the Add sent its clean-up")
				require.NoError(t, otherAdd, "the other Add")
				if row.wantFirst == nil {
					require.NoError(t, err, "the Add (its parent was deleted after its read)")
				} else {
					require.ErrorIs(t, err, row.wantFirst)
				}
				all := atRest(t, r, "p", capacity)
				require.Equal(t, []item{x}, all, "the other Add returned nil after the parent was created: x is stored")
			})
		}
	})
}

// TestAttackAddCASOnARecreatedParent: the compare-and-set of an Add's
// recomputation is filtered on the revision read ({_id, rev: {$exists:
// false}} before any recomputation). A parent deleted ([Repo.Delete]:
// the parent, then its items) and created again by the application
// (doc.go:35-36: "with the subset field absent or an empty array", no
// revision) between the Add's find of the first Cap items and its
// compare-and-set matches that filter: the Add writes into the new
// parent the items it read from the old one, which Delete has deleted,
// and returns nil.
//
// Promises: add.go:81-94 (an Add whose parent is deleted after its read
// "took effect before the deletion ... returns nil, after deleting the
// items it inserted, which go with the parent"); doc.go:31-33 (the
// subset is the first N items of All whenever no write is in flight);
// doc.go:45-47 (a linearization of the writes). Ordered before Delete,
// the Add leaves nothing; ordered after the creation, it leaves x stored
// and in the subset. The run leaves x in the subset and stored nowhere.
//
// Fixed: a recomputation stamps a parent without a revision with a
// random incarnation before reading the items (recompute.go, stamp), so
// that its compare-and-set matches no parent created again.
//
// Portable plan: the first Add to a fresh parent. Native plan: an Add of
// an item already stored and pushed (a retry; its guard fails and it
// recomputes), where the pushes left the revision the first Add stamped.
func TestAttackAddCASOnARecreatedParent(t *testing.T) {
	const capacity = 3
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(capacity), p)
		odb := mongotest.NewClient(t).Database(db.Name())
		other, err := subset.New[parent, item](odb, config(capacity))
		require.NoError(t, err)
		subset.ForcePlan(other, p)
		insertParents(t, db, "p")
		x := item{ID: 1, Parent: "p", Score: 3}
		at := int32(1) // the Add's compare-and-set is its first update
		var pre parent
		if p == pushPlan {
			require.NoError(t, r.Add(ctx, "p", x))
			pre, err = r.Get(ctx, "p")
			require.NoError(t, err)
			require.GreaterOrEqual(t, pre.Rev, int64(1)<<32, "the first Add stamped the parent (pushes leave the revision alone)")
			at = 2 // the guarded push, then the compare-and-set
		}
		ran := onNth(t, db, "update", at, func(ctx context.Context) {
			require.NoError(t, other.Delete(ctx, "p"), "Delete")
			insertParents(t, odb, "p")
		})
		err = r.Add(ctx, "p", x)
		require.True(t, ran(), "the Delete and the creation ran before the Add's compare-and-set")
		t.Logf("Add: %v", err)
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrNotFound)
		}
		atRest(t, r, "p", capacity)
	})
}

// TestAttackAddCleanupFailsThenRetry: add.go:92-94 "Should that
// deletion fail (the connection broke), Add returns that failure, since
// the items may remain: Add again deletes them, and reports
// ErrNotFound." The clean-up is failed by cancelling the Add's context
// as its deleteMany is sent.
func TestAttackAddCleanupFailsThenRetry(t *testing.T) {
	const capacity = 3
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(capacity), p)
		odb := mongotest.NewClient(t).Database(db.Name())
		other, err := subset.New[parent, item](odb, config(capacity))
		require.NoError(t, err)
		subset.ForcePlan(other, p)
		insertParents(t, db, "p")
		x := item{ID: 1, Parent: "p", Score: 3}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Delete runs before the Add's insert (after its read), so the
		// insert stores x under a deleted parent.
		onNth(t, db, "insert", 1, func(ctx context.Context) {
			require.NoError(t, other.Delete(ctx, "p"), "Delete")
		})
		ran := onNth(t, db, "delete", 1, func(context.Context) { cancel() })
		err = r.Add(ctx, "p", x)
		require.True(t, ran())
		t.Logf("first Add: %v", err)
		require.Error(t, err, "the clean-up failed")
		require.NotErrorIs(t, err, patterns.ErrNotFound)
		n := count(t, db.Collection("items"), bson.D{{Key: "parent", Value: "p"}})
		t.Logf("items left behind: %d", n)
		require.EqualValues(t, 1, n, "x is left behind by the failed clean-up")
		err = r.Add(context.Background(), "p", x)
		require.ErrorIs(t, err, patterns.ErrNotFound, "the retry reports the parent missing")
		require.Zero(t, count(t, db.Collection("items"), bson.D{{Key: "parent", Value: "p"}}), "the retry deleted them")
	})
}

// TestAttackAddCommandCounts: Add's round trips against its godoc.
//   - add.go:37-43 (push path): "The count ... finds an item that a
//     concurrent [Repo.Remove] deleted ... between the insert and the
//     push ...: Add then recomputes the subset (three commands more)":
//     4 + 3 = 7.
//   - doc.go:136 "[Repo.Add] 4 on either path"; doc.go:140-142 "With
//     Config.CountField ... every Add takes the portable path, 5 round
//     trips".
//   - add.go:45-46 "A subset field that $push cannot extend (null, say
//     ...) is replaced by a recomputation in place of the count: six
//     commands in all" (the godoc said "three commands more", 7, until
//     the attack counted 6).
//
// The other writer is a client outside the harness, so that its
// commands are not counted.
func TestAttackAddCommandCounts(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		t.Run("plain", func(t *testing.T) {
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, config(3), p)
			insertParents(t, db, "p")
			c := mongotest.NewCounter(t, db)
			got := c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 1, Score: 1})) })
			require.Len(t, got, 5, "doc.go: Add 4 on either path, and the first Add to a new parent stamps it (Costs): %v", got)
			got = c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 2, Score: 2})) })
			require.Len(t, got, 4, "doc.go: Add 4 on either path: %v", got)
		})
		t.Run("count field", func(t *testing.T) {
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, counted(3), p)
			insertParents(t, db, "p")
			c := mongotest.NewCounter(t, db)
			got := c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 1, Score: 1})) })
			require.Len(t, got, 6, "doc.go: with a count field every Add is 5 round trips, and the first stamps the new parent: %v", got)
		})
		if p != pushPlan {
			return
		}
		t.Run("a Remove between the insert and the push", func(t *testing.T) {
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, config(3), p)
			ow := otherWriter(t).Database(db.Name())
			other, err := subset.New[parent, item](ow, config(3))
			require.NoError(t, err)
			subset.ForcePlan(other, p)
			insertParents(t, db, "p")
			x := item{ID: 1, Score: 1}
			onNth(t, db, "update", 1, func(ctx context.Context) {
				require.NoError(t, other.Remove(ctx, "p", x.ID))
			})
			c := mongotest.NewCounter(t, db)
			got := c.Count(func() { require.NoError(t, r.Add(ctx, "p", x)) })
			require.Equal(t, []string{"find", "findAndModify", "insert", "update", "aggregate", "find", "find", "update"}, got, "4 + three commands more, and the stamp of the new parent")
		})
		t.Run("a null subset field", func(t *testing.T) {
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, config(3), p)
			_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "n"}, {Key: "top", Value: nil}})
			require.NoError(t, err)
			c := mongotest.NewCounter(t, db)
			got := c.Count(func() { require.NoError(t, r.Add(ctx, "n", item{ID: 1, Score: 1})) })
			require.Len(t, got, 7, "add.go: six commands in all (the recomputation in place of the count), and the stamp of the new parent: %v", got)
		})
	})
}

// TestAttackAddHookParentGone: doc.go (Observing) "its end, with the
// commands it sent ... and its error ... Nothing more is sent: the
// counts of commands above hold with a hook", for an Add whose parent is
// deleted after its read (the new nil outcome, with its clean-up).
func TestAttackAddHookParentGone(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		db := mongotest.DB(t)
		rec := mongotest.NewRecorder(t)
		cfg := config(3)
		cfg.Hook = rec
		r := newRepo[parent, item](t, db, cfg, p)
		ow := otherWriter(t).Database(db.Name())
		other, err := subset.New[parent, item](ow, config(3))
		require.NoError(t, err)
		subset.ForcePlan(other, p)
		insertParents(t, db, "p")
		onNth(t, db, "insert", 1, func(context.Context) {
			require.NoError(t, other.Delete(context.Background(), "p"), "Delete")
		})
		op := rec.RequireReports(t, "subset", "Add", false, func() error {
			return r.Add(context.Background(), "p", item{ID: 1, Score: 1})
		})
		t.Logf("commands %d, sent %v, err %v", op.Commands(), rec.Sent(op), op.Err)
		require.NoError(t, op.Err)
		require.Zero(t, count(t, db.Collection("items"), bson.D{}), "no item left behind")
	})
}

// TestAttackRebuildCASOnARecreatedParent: the revision ABA of
// TestAttackAddCASOnARecreatedParent is not Add's alone: every
// recomputation's compare-and-set ({_id, rev: {$exists: false}} on a
// parent never recomputed) matches a parent deleted and created again
// between its find of the first Cap items and its update. Rebuild
// (change.go:197-205, "to fill it for parents whose items were loaded
// without the repository") of a parent whose items were loaded directly
// writes the deleted items into the new parent. Promise: doc.go:31-33.
// Fixed with the stamp (recompute.go).
func TestAttackRebuildCASOnARecreatedParent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		odb := mongotest.NewClient(t).Database(db.Name())
		other, err := subset.New[parent, item](odb, config(3))
		require.NoError(t, err)
		subset.ForcePlan(other, p)
		insertParents(t, db, "p")
		_, err = db.Collection("items").InsertOne(ctx, item{ID: 1, Parent: "p", Score: 3})
		require.NoError(t, err)
		ran := onNth(t, db, "update", 1, func(ctx context.Context) {
			require.NoError(t, other.Delete(ctx, "p"), "Delete")
			insertParents(t, odb, "p")
		})
		err = r.Rebuild(ctx, "p")
		require.True(t, ran())
		t.Logf("Rebuild: %v", err)
		atRest(t, r, "p", 3)
	})
}

// TestAddIntoAParentCreatedAgain is the regression test of the
// histories' violations of seeds 4568237938135686512 and
// 3702322509042734293 (FerretDB 2.7, native plan; 16884280224928735882,
// on the code before the last fixes, has the same root). An Add reads its
// parent, which a Delete on another client then deletes (before the Add's
// insert, so that the items it stores are orphans); a Remove of one of
// them deletes it as an orphan ("An item of a missing parent ... is
// deleted all the same", Remove's godoc) and reports ErrNotFound; the
// application creates the parent again; then the Add writes its subset.
// Its push (filtered on the parent's _id alone) or, on the portable plan,
// its recomputation (whose stamp matches the parent created again, as
// unstamped as the deleted one) writes into the new parent, which the Add
// never read; the count after the push, or the recomputation, finds the
// removed item missing, as after a Remove between an insert and a push,
// and the Add returns nil with its other item stored under the new parent
// and the removed one stored nowhere. No order of the calls explains it
// (Add's godoc: it takes effect before the deletion, its items going with
// the parent, or, when it runs again on a parent created again, after the
// creation, its items "stored there and in its subset"). With a Get
// between the push and the count (seed 3702322509042734293), a reader sees
// in the new parent's subset an item stored nowhere; when the insert met
// another Add's orphan and kept its version ("An item whose id is already
// stored under the parent counts as added by the earlier attempt and keeps
// its stored version", seed 16884280224928735882), the push puts in the
// new parent a version no call stored under it.
//
// Fixed: Add stamps a parent it reads without a stamped revision before
// its insert, and binds its writes to that incarnation (the push's filter
// holds the stamp's range, the recomputation reads the parent in another
// incarnation as deleted), so that it takes back its items from the new
// parent and runs again there: x and y are both stored.
func TestAddIntoAParentCreatedAgain(t *testing.T) {
	const capacity = 3
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(capacity), p)
		other := otherRepo(t, db, p)
		odb := mongotest.NewClient(t).Database(db.Name())
		insertParents(t, db, "p")
		x, y := item{ID: 1, Parent: "p", Score: 2}, item{ID: 3, Parent: "p", Score: 1}
		// After the Add's read of its parent, before its insert: Delete.
		deleted := onNth(t, db, "insert", 1, func(ctx context.Context) {
			require.NoError(t, other.Delete(ctx, "p"), "Delete")
		})
		// Before the Add's first write to its parent after the Delete
		// (the push; on the portable plan, its compare-and-set; the
		// stamp is sent before the insert): a Remove of x, an orphan,
		// then the parent created again.
		var recreated atomic.Bool
		again := func(ctx context.Context) {
			if deleted() && recreated.CompareAndSwap(false, true) {
				require.ErrorIs(t, other.Remove(ctx, "p", x.ID), patterns.ErrNotFound, "Remove of an orphan")
				_, err := odb.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}})
				require.NoError(t, err, "the parent created again")
			}
		}
		mongotest.OnCommand(t, db, "update", again)
		mongotest.OnCommand(t, db, "findAndModify", again)
		err := r.Add(ctx, "p", x, y)
		require.True(t, deleted(), "the Delete ran")
		require.True(t, recreated.Load(), "the parent was created again")
		require.NoError(t, err, "the Add found its parent")
		all := atRest(t, r, "p", capacity)
		if len(all) != 0 {
			require.Equal(t, ranked([]item{x, y}), all,
				"an Add that returned nil took effect before the Delete (no item) or after the creation (both items)")
		}
	})
}
