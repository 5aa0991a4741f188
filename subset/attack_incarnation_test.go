package subset_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// Attacks on commit e3f0d7b (subset: an Add binds its writes to the
// incarnation of the parent it read: the stamp before the insert, the
// push filtered on the stamp's range, recompute(..., inc), settlePush's
// nil for a parent of another incarnation).

// outsideRepo is a repository on a client outside the harness (its
// commands are neither counted nor hooked).
func outsideRepo(t *testing.T, db *mongo.Database, p subset.Plan, cfg subset.Config) (*subset.Repo[parent, item], *mongo.Database) {
	t.Helper()
	ow := otherWriter(t).Database(db.Name())
	r, err := subset.New[parent, item](ow, cfg)
	require.NoError(t, err)
	subset.ForcePlan(r, p)
	return r, ow
}

// rawParent reads the parent as stored.
func rawParent(t *testing.T, db *mongo.Database, id string) bson.Raw {
	t.Helper()
	raw, err := db.Collection("parents").FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Raw()
	require.NoError(t, err)
	return raw
}

// TestAttackIncStampRaceRoundTrips: add.go:31 "Push path ...: four
// commands"; add.go:50-53 "On either path, the first Add to a parent that
// no Add or recomputation has written since its creation (it has no
// stamped revision) stamps it after the read (one command more, once per
// parent ...)"; add.go:56 "Portable path ...: four commands"; doc.go
// (Costs) "[Repo.Add] 4 on either path ... the first Add or recomputation
// of a parent without a revision adds its stamp, 1".
//
// Two Adds to a new parent: the other one stamps it between this Add's
// read and its stamp. This Add is not the first, yet it sends its stamp
// (a findAndModify that matches nothing) and a second read of the parent
// (ensureStamped): six commands, where the godoc allows four (not the
// first Add) or five (the first).
func TestAttackIncStampRaceRoundTrips(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		other, _ := outsideRepo(t, db, p, config(3))
		insertParents(t, db, "p")
		ran := onNth(t, db, "findAndModify", 1, func(ctx context.Context) {
			require.NoError(t, other.Add(ctx, "p", item{ID: 9, Score: 9}), "the other Add, which stamps the parent first")
		})
		c := mongotest.NewCounter(t, db)
		got := c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 1, Score: 1})) })
		require.True(t, ran())
		atRest(t, r, "p", 3)
		// Fixed in the godoc (add.go): "two more when another call
		// stamps it first (the stamp that matches nothing, and a read
		// again)".
		require.Len(t, got, 6, "Add: four commands, two more when another call stamps the new parent between its read and its stamp: %v", got)
	})
}

// TestAttackIncRevisionNearMaxInt64: doc.go (Recomputation) "A parent
// that has none ..., or holds there anything but an int64 of at least
// 2^32 ..., is first stamped": an int64 of at least 2^32 is a stamped
// revision, kept as it is; add.go:31 "Push path ...: four commands";
// doc.go (Costs) "[Repo.Add] 4 on either path"; doc.go:31-33 the subset is
// the first N items at rest.
//
// A revision near 2^63 (an int64 the application wrote, at least 2^32,
// so taken as stamped): the push's filter is {rev: {$gte: inc, $lt: inc +
// 2^32}} (commands.go, pushFilter), and inc + 2^32 overflows int64 to a
// negative number (Go's wrapping arithmetic), so that the range is empty
// and no push ever matches: every Add on the push plan misses its push,
// reads the parent and recomputes (six commands where four are
// promised). At math.MaxInt64 the recomputation's $inc (portable)
// overflows and fails every Add after its insert (MongoDB's
// src/mongo/util/safe_num.cpp, addInt64Int64: "if our precondition test
// detects overflow we must return an invalid SafeNum", which $inc
// reports as "Failed to apply $inc operations"), and the push plan's
// $add turns the revision into a double (an overflowing $add of longs
// gives a double in the aggregation language), which the next write
// stamps again.
func TestAttackIncRevisionNearMaxInt64(t *testing.T) {
	rows := []struct {
		name string
		rev  int64
	}{
		{"MaxInt64-1000", math.MaxInt64 - 1000},
		{"MaxInt64", math.MaxInt64},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), p)
				_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: row.rev}})
				require.NoError(t, err)
				c := mongotest.NewCounter(t, db)
				var addErr error
				got := c.Count(func() { addErr = r.Add(ctx, "p", item{ID: 1, Score: 1}) })
				t.Logf("Add: %v; sent %v; parent %s", addErr, got, rawParent(t, db, "p"))
				require.NoError(t, addErr, "Add to a parent whose revision is an int64 of at least 2^32")
				atRest(t, r, "p", 3)
				// Fixed: an int64 from 2^62 + 2^32 is no stamp (commands.go,
				// maxStamp): the first Add stamps it, the next sends four.
				require.Len(t, got, 5, "Add: the first to a parent without a stamped revision stamps it: %v", got)
				got = c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 2, Score: 2})) })
				require.Len(t, got, 4, "Add: four commands on a stamped parent: %v", got)
				atRest(t, r, "p", 3)
			})
		}
	})
}

// TestAttackIncArrayRevision: doc.go (Recomputation) "A parent that has
// none ..., or holds there anything but an int64 of at least 2^32 ..., is
// first stamped with a random int64 multiple of 2^32 ..., by a
// findAndModify filtered on such a revision"; add.go:50-53 the first Add
// stamps it (one command more); doc.go:35-36 "The application creates its
// parents as it likes".
//
// A revision that is an array holding an int64 of at least 2^32 is not an
// int64 (decodeParent: unstamped), but the stamp's filter
// ({$or: [{rev: {$not: {$type: "long"}}}, {rev: {$lt: 2^32}}]},
// commands.go, unstamped) does not match it: the MongoDB manual, $type:
// "For documents where field is an array, $type returns documents in
// which at least one array element matches the type", so $not $type
// "long" is false, and $lt matches no element. ensureStamped stamps in
// vain 10 times (21 commands) and Add returns ErrConflict ("call
// Rebuild", which fails the same way), every time.
func TestAttackIncArrayRevision(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: bson.A{int64(1) << 33}}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		var addErr error
		got := c.Count(func() { addErr = r.Add(ctx, "p", item{ID: 1, Score: 1}) })
		t.Logf("Add: %v; %d commands", addErr, len(got))
		t.Logf("Rebuild: %v", r.Rebuild(ctx, "p"))
		require.NoError(t, addErr, "Add to a parent whose revision is not an int64 (it is stamped first)")
		atRest(t, r, "p", 3)
	})
}

// TestAttackIncSettlePushOnARestampedParent: doc.go:31-33 "the subset
// is, whenever no write is in flight, exactly the first N items that
// [Repo.All] yields"; add.go:40-47 "The count ... finds an item that a
// concurrent [Repo.Remove] deleted ... between the insert and the push,
// which the push put in the subset nonetheless: Add then recomputes the
// subset ..., so that it keeps no item ... that is not stored"; doc.go
// (Recomputation) a revision that holds "a double, as a JavaScript client
// may write it back" is stamped first (the repository handles it).
//
// Push plan: a Remove of x between the Add's insert and its push (its
// recomputation finds x neither stored nor in the subset); the push puts
// x in the subset; then a JavaScript client writes the parent back, its
// revision as a double (mongosh and the Node driver read an int64 past
// 2^53 as a Number and write it back as a double). The parent was never
// deleted, but settlePush's read sees no stamped revision, so
// recompute(..., inc) returns errRecreated and settlePush returns nil
// (add.go, settlePush: "A parent deleted (and perhaps created again)
// since the push took the items with it"): Add returns nil with x, stored
// nowhere, in the subset. Before e3f0d7b the recomputation (inc 0)
// stamped the parent and took x out.
func TestAttackIncSettlePushOnARestampedParent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p != pushPlan {
			t.Skip("the push plan's settlePush")
		}
		for _, writeBack := range []bool{false, true} {
			t.Run(map[bool]string{false: "control: no write-back", true: "revision written back as a double"}[writeBack], func(t *testing.T) {
				settlePushCase(t, p, writeBack)
			})
		}
	})
}

func settlePushCase(t *testing.T, p subset.Plan, writeBack bool) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), p)
	other := otherRepo(t, db, p) // a harness client: its commands are hooked
	ow := otherWriter(t).Database(db.Name())
	insertParents(t, db, "p")
	require.NoError(t, r.Add(ctx, "p", item{ID: 5, Score: 5})) // stamped
	x, y := item{ID: 1, Score: 3}, item{ID: 2, Score: 2}
	// The Remove of x deletes x and reads the parent before the Add's
	// push, and reads the items and sets the subset after it: its
	// merge keeps x, "pushed since" (doc.go, Recomputation), which
	// the Add's count finds and its recomputation must take out.
	var armed, removing atomic.Bool
	var finds atomic.Int32
	readDone, release, removed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	onNth(t, db, "update", 1, func(context.Context) {
		armed.Store(true)
		removing.Store(true)
		go func() { removed <- other.Remove(context.Background(), "p", x.ID) }()
		<-readDone
	})
	mongotest.OnCommand(t, db, "find", func(context.Context) {
		if armed.Load() && finds.Add(1) == 2 { // the Remove's find of the items, after its read of the parent
			close(readDone)
			<-release
		}
	})
	written := onNth(t, db, "aggregate", 1, func(ctx context.Context) {
		close(release)
		require.NoError(t, <-removed, "Remove of x")
		// A JavaScript client writes the parent back: its revision
		// as a double of the same value.
		if !writeBack {
			return
		}
		rev := rawParent(t, ow, "p").Lookup("topRev").Int64()
		_, err := ow.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "topRev", Value: float64(rev)}}}})
		require.NoError(t, err)
		t.Logf("before the Add's count: %s", rawParent(t, ow, "p"))
	})
	c := mongotest.NewCounter(t, db)
	var err error
	sent := c.Count(func() { err = r.Add(ctx, "p", x, y) })
	t.Logf("Add: %v; sent %v; parent %s", err, sent, rawParent(t, db, "p"))
	require.True(t, removing.Load())
	require.True(t, written())
	require.NoError(t, err)
	all := atRest(t, r, "p", 3)
	require.Equal(t, ranked([]item{{ID: 5, Parent: "p", Score: 5}, {ID: 2, Parent: "p", Score: 2}}), all)
}

// TestAttackIncInvalidAddWritesTheParent: add.go:134-136 "Bad input
// gives [patterns.ErrInvalid] and writes nothing: ... an id stored under
// another parent"; doc.go:36-39 "the repository writes only two fields of
// a parent, the subset and its revision". An Add of an id stored under
// another parent is refused by its insert, which now comes after the
// stamp: the refused Add has written the parent's revision (a Get of a
// parent type that maps it sees it changed), though nothing was added.
func TestAttackIncInvalidAddWritesTheParent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		insertParents(t, db, "p", "q")
		require.NoError(t, r.Add(ctx, "q", item{ID: 1, Score: 1}))
		before := rawParent(t, db, "p")
		err := r.Add(ctx, "p", item{ID: 1, Score: 1})
		require.ErrorIs(t, err, patterns.ErrInvalid)
		after := rawParent(t, db, "p")
		// Fixed in the godoc (add.go): the insert finds the id taken
		// after the stamp of the new parent, which remains (the only
		// write of the refused Add): its revision, and on the push plan
		// its push field (Config.PushedField).
		strip := func(raw bson.Raw) bson.M {
			var m bson.M
			require.NoError(t, bson.Unmarshal(raw, &m))
			delete(m, "topRev")
			delete(m, "topPushed")
			return m
		}
		require.Equal(t, strip(before), strip(after), "an Add refused with ErrInvalid writes nothing but the stamp of a new parent")
		rev, ok := after.Lookup("topRev").Int64OK()
		require.True(t, ok && rev >= 1<<32 && rev%(1<<32) == 0, "the stamp: %s", after)
	})
}

// TestAttackIncRecomputedThenAddRoundTrips: doc.go (Costs) "[Repo.Add] 4
// on either path"; once stamped, the revision a recomputation writes
// must stay a stamped revision (an int64 of at least 2^32: mergeUpdate
// writes {$add: [{$ifNull: ["$rev", 0]}, 1]}, setUpdate $inc), or every
// later Add stamps again (a new incarnation) and a concurrent Add's push
// bound to the old one misses. Add, Remove, then Add: four commands.
func TestAttackIncRecomputedThenAddRoundTrips(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		insertParents(t, db, "p")
		require.NoError(t, r.Add(ctx, "p", item{ID: 1, Score: 1}, item{ID: 2, Score: 2}))
		require.NoError(t, r.Remove(ctx, "p", int64(1)))
		rev := rawParent(t, db, "p").Lookup("topRev")
		require.Equal(t, bson.TypeInt64, rev.Type, "the revision a recomputation wrote: %s", rev)
		c := mongotest.NewCounter(t, db)
		got := c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 3, Score: 3})) })
		require.Len(t, got, 4, "%v", got)
		atRest(t, r, "p", 3)
	})
}

// TestAttackIncRerunsGiveConflict: add.go:121-123 "A parent deleted and
// created again under each of 10 such runs gives [patterns.ErrConflict]:
// Add again"; add.go:88 a failed Add leaves no item behind when it says
// nothing is stored. Each run: Delete after the read (before the insert,
// so the items are orphans), the parent created again before the push or
// the compare-and-set.
func TestAttackIncRerunsGiveConflict(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		other, ow := outsideRepo(t, db, p, config(3))
		insertParents(t, db, "p")
		mongotest.OnCommand(t, db, "insert", func(ctx context.Context) {
			require.NoError(t, other.Delete(ctx, "p"))
		})
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
			insertParents(t, ow, "p")
		})
		err := r.Add(ctx, "p", item{ID: 1, Score: 1})
		t.Logf("Add: %v", err)
		require.True(t, errors.Is(err, patterns.ErrConflict), "ErrConflict after 10 runs: %v", err)
		require.Zero(t, count(t, db.Collection("items"), bson.D{}), "no item left behind")
	})
}

// addCommands are the names of every command an Add may send.
var addCommands = []string{"find", "findAndModify", "insert", "update", "aggregate", "delete", "getMore", "killCursors"}

// TestAttackIncDeleteAndCreateSweep: Add's godoc (add.go:83-125) for a
// parent deleted, and perhaps created again, while an Add runs: "Its
// writes to the parent are bound to the incarnation it read ... Add never
// writes into it what it stored for the deleted one"; it returns nil,
// having taken effect before the deletion (its items deleted with the
// parent), or runs again on the parent created again and "returns once
// its items are stored there and in its subset"; doc.go:31-33 (at rest
// the subset is the first N items of All); doc.go (Observing) the
// commands a hook reports are those sent. The Delete (another client) runs
// before the Add's i-th command, the creation of the parent (and, in the
// rows that say so, another client's Add to it) before its j-th (j >= i):
// every pair of steps, both plans. What an Add that returned nil may
// leave: none of its items (before the Delete) or all of them (again on
// the new parent), never some; the other Add's item is stored.
func TestAttackIncDeleteAndCreateSweep(t *testing.T) {
	rows := []struct {
		name    string
		other   *item // an Add of another client to the new parent
		stamped bool  // the parent is stamped (an earlier Add) before the Add
	}{
		{"created again", nil, false},
		{"created again, another Add of z", &item{ID: 7, Score: 7}, false},
		{"created again, another Add of x", &item{ID: 1, Score: 9}, false},
		{"stamped, created again", nil, true},
		{"stamped, created again, another Add of z", &item{ID: 7, Score: 7}, true},
		{"stamped, created again, another Add of x", &item{ID: 1, Score: 9}, true},
		{"count field, created again", nil, false},
		{"Remove of x, an orphan, then created again", nil, false},
		{"stamped, Remove of x, an orphan, then created again", nil, true},
		{"count field, stamped, created again, another Add of z", &item{ID: 7, Score: 7}, true},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := context.Background()
				x, y := item{ID: 1, Score: 3}, item{ID: 2, Score: 2}
				for i := 0; ; i++ {
					fired := false
					for j := i; ; j++ {
						db := mongotest.DB(t)
						rec := mongotest.NewRecorder(t)
						cfg := config(3)
						if strings.HasPrefix(row.name, "count field") {
							cfg = counted(3)
						}
						ocfg := cfg
						cfg.Hook = rec
						r := newRepo[parent, item](t, db, cfg, p)
						other, ow := outsideRepo(t, db, p, ocfg)
						insertParents(t, db, "p")
						if row.stamped {
							require.NoError(t, other.Add(ctx, "p", item{ID: 5, Score: 5}))
						}
						var otherErr error
						// The other client's calls take a context of their
						// own: the window's carries the Add's operation.
						del := mongotest.InWindow(t, db, i, func(context.Context) {
							require.NoError(t, other.Delete(ctx, "p"))
						}, addCommands...)
						cre := mongotest.InWindow(t, db, j, func(context.Context) {
							if strings.Contains(row.name, "Remove of x") {
								require.ErrorIs(t, other.Remove(ctx, "p", x.ID), patterns.ErrNotFound, "Remove of x, the parent missing")
							}
							insertParents(t, ow, "p")
							if row.other != nil {
								otherErr = other.Add(ctx, "p", *row.other)
							}
						}, addCommands...)
						op := rec.RequireReports(t, "subset", "Add", false, func() error { return r.Add(ctx, "p", x, y) })
						del.Close()
						cre.Close()
						fired = del.Fired()
						if !cre.Fired() {
							break
						}
						name := fmt.Sprintf("delete before %d (%v), create before %d (%v)", i, del.Sent(), j, cre.Sent())
						require.NoError(t, otherErr, name)
						// ErrNotFound: a step found no parent before the
						// Add stored anything (see
						// TestAttackIncStampFindsTheParentGone for the
						// godoc's nil).
						if op.Err != nil {
							require.ErrorIs(t, op.Err, patterns.ErrNotFound, "%s: sent %v", name, rec.Sent(op))
						}
						all := atRest(t, r, "p", 3)
						if cfg.CountField != "" {
							n, err := r.Count(ctx, "p")
							require.NoError(t, err)
							require.EqualValues(t, len(all), n, "%s: the count field at rest", name)
						}
						ids := map[int64]int64{}
						for _, it := range all {
							ids[it.ID] = it.Score
						}
						_, hasX := ids[x.ID]
						_, hasY := ids[y.ID]
						if op.Err != nil {
							require.False(t, hasY, "%s: ErrNotFound, yet y is stored: %v", name, all)
						}
						if row.other == nil || row.other.ID != x.ID {
							require.Equal(t, hasX, hasY, "%s: the Add's items all or none: %v (sent %v)", name, all, rec.Sent(op))
						} else {
							require.True(t, hasX, "%s: the other Add's x is stored: %v", name, all)
						}
						if row.other != nil {
							_, ok := ids[row.other.ID]
							require.True(t, ok, "%s: the other Add returned nil after the creation: %v", name, all)
						}
					}
					if !fired {
						break
					}
				}
			})
		}
	})
}

// TestAttackIncStampFindsTheParentGone: add.go:97-103 "A parent deleted
// concurrently, after that read (and perhaps created again), is found by
// a later step (the push that matches nothing, the compare-and-set of a
// recomputation, the read that follows them): the Add took effect before
// the deletion ..., so it returns nil". The stamp, now a step between the
// read and the insert (add.go:50-53), that finds the parent deleted after
// the read, makes Add return ErrNotFound instead (ensureStamped's read
// finds no parent). Nothing is stored, so the outcome is one order of the
// calls; the godoc's nil is not what the caller gets.
func TestAttackIncStampFindsTheParentGone(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		other, _ := outsideRepo(t, db, p, config(3))
		insertParents(t, db, "p")
		ran := onNth(t, db, "findAndModify", 1, func(context.Context) {
			require.NoError(t, other.Delete(ctx, "p"), "Delete, after the Add's read")
		})
		err := r.Add(ctx, "p", item{ID: 1, Score: 1})
		require.True(t, ran())
		require.Zero(t, count(t, db.Collection("items"), bson.D{}))
		// Fixed in the godoc (add.go): a parent missing at the read or at
		// the stamp that follows it, before anything is stored, gives
		// ErrNotFound.
		require.ErrorIs(t, err, patterns.ErrNotFound, "a parent deleted after the Add's read, before its stamp")
	})
}

// TestAttackIncRevisionTypesRoundTrips: doc.go (Recomputation) "A parent
// that has none ..., or holds there anything but an int64 of at least
// 2^32 (null; 0 ...; a double ...), is first stamped ...: one command
// more, once per parent, sent by the first recomputation or the first
// [Repo.Add]"; add.go:50-53; doc.go (Costs) "[Repo.Add] 4 on either
// path". Every BSON type in the revision: the first Add sends five
// commands, the next four, and the revision is then a stamp.
func TestAttackIncRevisionTypesRoundTrips(t *testing.T) {
	dec, err := bson.ParseDecimal128("8589934592")
	require.NoError(t, err)
	decNaN, err := bson.ParseDecimal128("NaN")
	require.NoError(t, err)
	rows := []struct {
		name string
		rev  any
	}{
		{"int32 7", int32(7)},
		{"int64 0", int64(0)},
		{"int64 -5", int64(-5)},
		{"int64 MinInt64", int64(math.MinInt64)},
		{"double 2^33", float64(1 << 33)},
		{"double -0", math.Copysign(0, -1)},
		{"double NaN", math.NaN()},
		{"double -Inf", math.Inf(-1)},
		{"decimal 2^33", dec},
		{"decimal NaN", decNaN},
		{"string", "8589934592"},
		{"null", nil},
		{"bool", true},
		{"object", bson.D{{Key: "a", Value: int64(1) << 33}}},
		{"empty array", bson.A{}},
		{"array of a small long", bson.A{int64(1)}},
		{"MinKey", bson.MinKey{}},
		{"MaxKey", bson.MaxKey{}},
		{"date", bson.DateTime(1 << 40)},
		{"timestamp", bson.Timestamp{T: 1 << 31, I: 1}},
		{"ObjectID", bson.NewObjectID()},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), p)
				if _, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: row.rev}}); err != nil {
					t.Skipf("the server refuses the parent: %v", err)
				}
				c := mongotest.NewCounter(t, db)
				var addErr error
				first := c.Count(func() { addErr = r.Add(ctx, "p", item{ID: 1, Score: 1}) })
				require.NoError(t, addErr, "first Add: %v", first)
				require.Len(t, first, 5, "the first Add stamps: %v", first)
				rev := rawParent(t, db, "p").Lookup("topRev")
				require.Equal(t, bson.TypeInt64, rev.Type, "stamped: %s", rev)
				require.GreaterOrEqual(t, rev.Int64(), int64(1)<<32)
				next := c.Count(func() { require.NoError(t, r.Add(ctx, "p", item{ID: 2, Score: 2})) })
				require.Len(t, next, 4, "%v", next)
				atRest(t, r, "p", 3)
			})
		}
	})
}

// TestAttackIncRecomputeFollowsSweep: recompute.go (recompute) "with inc
// 0 it follows the parent through its re-creations, recomputing the one
// it finds", with its floor reset on a new incarnation; doc.go:31-33 (at
// rest the subset is the first N items of All); Remove's and Update's
// godoc (a parent deleted after their write gives ErrNotFound). A Remove,
// an Update and a Rebuild, the parent deleted before the i-th command
// and created again (with another client's Add of z) before the j-th.
func TestAttackIncRecomputeFollowsSweep(t *testing.T) {
	ops := []struct {
		name string
		call func(ctx context.Context, r *subset.Repo[parent, item]) error
	}{
		{"Remove", func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Remove(ctx, "p", int64(1)) }},
		{"Update", func(ctx context.Context, r *subset.Repo[parent, item]) error {
			return r.Update(ctx, "p", item{ID: 2, Score: 8})
		}},
		{"Rebuild", func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Rebuild(ctx, "p") }},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, o := range ops {
			t.Run(o.name, func(t *testing.T) {
				ctx := context.Background()
				for i := 0; ; i++ {
					fired := false
					for j := i; ; j++ {
						db := mongotest.DB(t)
						rec := mongotest.NewRecorder(t)
						cfg := config(3)
						cfg.Hook = rec
						r := newRepo[parent, item](t, db, cfg, p)
						other, ow := outsideRepo(t, db, p, config(3))
						insertParents(t, db, "p")
						require.NoError(t, other.Add(ctx, "p", item{ID: 1, Score: 3}, item{ID: 2, Score: 2}))
						var otherErr error
						del := mongotest.InWindow(t, db, i, func(context.Context) {
							require.NoError(t, other.Delete(ctx, "p"))
						}, addCommands...)
						cre := mongotest.InWindow(t, db, j, func(context.Context) {
							insertParents(t, ow, "p")
							otherErr = other.Add(ctx, "p", item{ID: 7, Score: 7}, item{ID: 2, Score: 1})
						}, addCommands...)
						name := o.name
						op := rec.RequireReports(t, "subset", name, false, func() error { return o.call(ctx, r) })
						del.Close()
						cre.Close()
						fired = del.Fired()
						if !cre.Fired() {
							break
						}
						name = fmt.Sprintf("%s: delete before %d (%v), create before %d (%v)", name, i, del.Sent(), j, cre.Sent())
						require.NoError(t, otherErr, name)
						if op.Err != nil {
							require.ErrorIs(t, op.Err, patterns.ErrNotFound, "%s: sent %v", name, rec.Sent(op))
						}
						all := atRest(t, r, "p", 3)
						t.Logf("%s: %v, %v", name, op.Err, all)
					}
					if !fired {
						break
					}
				}
			})
		}
	})
}

// TestAttackIncRestampedParentLosesAnUpdate: Update's godoc (change.go:
// 128) "Update replaces one item of the parent ... in the items
// collection"; add.go:70-73 "An item whose id is already stored under the
// parent counts as added by the earlier attempt and keeps its stored
// version (Add is not an upsert: use [Repo.Update] to change an item)";
// add.go:112-118: only "when a parent is deleted and created again during
// an Add" may "a version another call stored (another Add's, an
// [Repo.Update]'s) ... be replaced by this Add's"; doc.go (Recomputation):
// a revision holding "a double, as a JavaScript client may write it back"
// is handled (stamped first).
//
// An Add of x; after its insert, another client's Update of x (x', which
// it recomputes into the subset, and returns nil); then a JavaScript
// client writes the parent back, its revision as a double (the Node
// driver reads an int64 past 2^53 as a Number and writes a double). The
// parent is never deleted. The Add's next step (its push, or its
// compare-and-set) misses, its read of the parent finds no stamped
// revision, recompute(..., inc) calls it another incarnation
// (errRecreated), and the Add takes back its items by id, deleting x' (the
// Update's version), then runs again and stores its own x. Both orders of
// the two calls leave x' (Add then Update: replaced; Update then Add: the
// Add keeps the stored version); the run leaves x: the Update, which
// returned nil, is lost.
func TestAttackIncRestampedParentLosesAnUpdate(t *testing.T) {
	t.Skip("issue 34, named in doc.go (Recomputation): the revision field is the repository's; another writer that rewrites it (a JavaScript client writing it back as a double) while an Add is in flight makes the parent look created again, and the Add takes its items back and runs again on it, which may replace a version or undo a removal that another call made meanwhile")
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, writeBack := range []bool{false, true} {
			t.Run(map[bool]string{false: "control: no write-back", true: "revision written back as a double"}[writeBack], func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), p)
				other, ow := outsideRepo(t, db, p, config(3))
				insertParents(t, db, "p")
				require.NoError(t, r.Add(ctx, "p", item{ID: 5, Score: 5})) // stamped
				require.NoError(t, r.Rebuild(ctx, "p"))                    // the revision moves past the stamp
				x, x2 := item{ID: 1, Score: 3}, item{ID: 1, Score: 9}
				ran := onNth(t, db, "update", 1, func(context.Context) {
					require.NoError(t, other.Update(ctx, "p", x2), "Update of x, after the Add's insert")
					if writeBack {
						rev := rawParent(t, ow, "p").Lookup("topRev").Int64()
						_, err := ow.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "topRev", Value: float64(rev)}}}})
						require.NoError(t, err)
					}
				})
				c := mongotest.NewCounter(t, db)
				var err error
				sent := c.Count(func() { err = r.Add(ctx, "p", x) })
				t.Logf("Add: %v; sent %v; parent %s", err, sent, rawParent(t, db, "p"))
				require.True(t, ran())
				require.NoError(t, err)
				all := atRest(t, r, "p", 3)
				require.Equal(t, ranked([]item{{ID: 5, Parent: "p", Score: 5}, {ID: 1, Parent: "p", Score: 9}}), all,
					"the Update returned nil after the Add's insert: x is stored as it wrote it")
			})
		}
	})
}

// TestAttackIncRestampedParentUndoesARemove: Remove's godoc (change.go:
// 16-17, 51-55) "Remove deletes one item of the parent from the items
// collection ... An Add of the same item that overlaps its Remove leaves,
// once both have returned, the item stored or not, as one order of the
// two calls gives"; doc.go (Recomputation): a revision that a JavaScript
// client wrote back as a double is handled. An Add of x and y; after its
// insert, another client's Remove of x (nil: it deleted x, so it comes
// after the Add); then the revision written back as a double. The Add's
// next step reads another incarnation, takes back y (x is gone), finds
// the parent, runs again and stores x and y: x, removed by a Remove that
// returned nil after the Add's insert, is stored again. Add then Remove
// leaves y alone; Remove then Add cannot be (the Remove found x stored).
func TestAttackIncRestampedParentUndoesARemove(t *testing.T) {
	t.Skip("issue 34, named in doc.go (Recomputation): the revision field is the repository's; another writer that rewrites it (a JavaScript client writing it back as a double) while an Add is in flight makes the parent look created again, and the Add takes its items back and runs again on it, which may replace a version or undo a removal that another call made meanwhile")
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, writeBack := range []bool{false, true} {
			t.Run(map[bool]string{false: "control: no write-back", true: "revision written back as a double"}[writeBack], func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), p)
				other, ow := outsideRepo(t, db, p, config(3))
				insertParents(t, db, "p")
				require.NoError(t, r.Add(ctx, "p", item{ID: 5, Score: 5})) // stamped
				require.NoError(t, r.Rebuild(ctx, "p"))                    // the revision moves past the stamp
				x, y := item{ID: 1, Score: 3}, item{ID: 2, Score: 2}
				ran := onNth(t, db, "update", 1, func(context.Context) {
					require.NoError(t, other.Remove(ctx, "p", x.ID), "Remove of x, after the Add's insert")
					if writeBack {
						rev := rawParent(t, ow, "p").Lookup("topRev").Int64()
						_, err := ow.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "topRev", Value: float64(rev)}}}})
						require.NoError(t, err)
					}
				})
				c := mongotest.NewCounter(t, db)
				var err error
				sent := c.Count(func() { err = r.Add(ctx, "p", x, y) })
				t.Logf("Add: %v; sent %v", err, sent)
				require.True(t, ran())
				require.NoError(t, err)
				all := atRest(t, r, "p", 3)
				require.Equal(t, ranked([]item{{ID: 5, Parent: "p", Score: 5}, {ID: 2, Parent: "p", Score: 2}}), all,
					"the Remove of x returned nil after the Add's insert: x is not stored")
			})
		}
	})
}

// TestAttackIncDeleteWipesTheNewParentsItems: doc.go:31-33 "the subset
// is, whenever no write is in flight, exactly the first N items that
// [Repo.All] yields"; Add's godoc: an Add that returns nil has its items
// stored and in the subset (it runs again on a parent created again "and
// returns once its items are stored there and in its subset"); Delete's
// godoc (repo.go:196) "Delete deletes the parent, then all its items: two
// commands". Between Delete's two commands the application creates the
// parent again and an Add (another client) stores x under it, in the
// items collection and the subset, and returns nil; then Delete's
// deleteMany ({parent: id}, every incarnation) deletes x. At rest the new
// parent's subset holds x, stored nowhere. No order of the calls gives
// it (Delete, creation, Add: x stored). An Add whose rerun (add.go,
// errParentBack) stored its items on the new parent before the Delete's
// second command loses them the same way.
func TestAttackIncDeleteWipesTheNewParentsItems(t *testing.T) {
	t.Skip("issue 34, named in Delete's godoc (repo.go): a parent created again while its Delete is in flight, between its two commands, may lose the items stored under it meanwhile (the items carry no incarnation); create a parent again once its Delete has returned")
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		other, ow := outsideRepo(t, db, p, config(3))
		insertParents(t, db, "p")
		require.NoError(t, r.Add(ctx, "p", item{ID: 5, Score: 5}))
		x := item{ID: 1, Score: 3}
		var addErr error
		ran := onNth(t, db, "delete", 2, func(context.Context) {
			insertParents(t, ow, "p")
			addErr = other.Add(ctx, "p", x)
		})
		err := r.Delete(ctx, "p")
		require.True(t, ran(), "the creation and the Add ran before Delete's deleteMany")
		require.NoError(t, err, "Delete")
		require.NoError(t, addErr, "the Add to the parent created again")
		atRest(t, r, "p", 3)
	})
}
