package subset_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// bigItems returns n items of about size bytes each (their body), scores
// n..1, ids from id.
func bigItems(id int64, n, size int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{ID: id + int64(i), Score: int64(n - i), Body: strings.Repeat(string(rune('a'+i%26)), size)}
	}
	return out
}

// multiBatch returns the size of the items of an Add that inserts 4 of
// them in two batches (3, then 1, or 2 and 2), and sets r's batches to
// that: 4 items of 12.5 MB and the batches of 32 MiB of Add (50 MB, past
// the 48,000,000 bytes at which the driver splits an insertMany) in the
// soak (MONGOPATTERNS_SOAK set), 4 items of 1,000 bytes and batches of
// 3,500 bytes otherwise, which takes Add through the same batches in a
// fraction of the time.
func multiBatch[P any](r *subset.Repo[P, item]) int {
	if os.Getenv("MONGOPATTERNS_SOAK") != "" {
		return 12_500_000
	}
	subset.SetInsertBatchBytes(r, 3_500)
	return 1_000
}

// adder is an Add and a Remove of a repository of either parent type.
type adder interface {
	Add(ctx context.Context, parentID any, items ...item) error
	Remove(ctx context.Context, parentID, itemID any) error
}

// TestAttackAddMultiBatchCommandDeadlockResendsApplied: the driver splits
// an insertMany past maxMessageSizeBytes (48,000,000 on both servers) into
// several insert commands (driver v2.10.0 x/mongo/driver/operation.go,
// Execute: batches advanced with currIndex); when a later batch fails with
// a command error (ok: 0, FerretDB 2.x's deadlock in one of the two shapes
// faults.TransientProxy forges), Execute returns that batch's error at
// once ("case Error: ... return tt"), InsertMany a CommandError, though
// the earlier batches applied. insertOnce takes it for "a command that
// failed whole with one applied nothing, and is sent again whole", and
// sends every item again, those of the applied batch among them: an item a
// concurrent Remove deleted between the two sends, after that Remove
// returned nil, is stored again. It is the bug the commit fixes (CHANGELOG:
// "It now sends again only the statements that failed"), on an Add of
// items whose total passes 48 MB. Fixed: Add inserts its items in
// batches of 32 MiB at most, each one command (insertBatches).
//
// On the portable plan (FerretDB 1.x's), and on the server's own plan with
// Config.CountField, which takes the portable path on every server, FerretDB
// 2.x (the server that deadlocks) among them. (On the push plan an Add of
// more than 16 MiB of items failed at the push: see
// TestAttackAddPushPastSixteenMiB.)
func TestAttackAddMultiBatchCommandDeadlockResendsApplied(t *testing.T) {
	multiBatchDeadlock(t, false)
}

// TestAttackAddMultiBatchWriteErrorDeadlockHeld is the control of
// TestAttackAddMultiBatchCommandDeadlockResendsApplied: the second batch
// fails with a deadlock write error of each of its statements (the other
// shape), which the driver reports at indexes global to the insertMany
// (operation.go: "tt.WriteErrors[i].Index += int64(currIndex)"), so that
// insertOnce sends again that batch's items alone, and x stays removed.
// It passes.
func TestAttackAddMultiBatchWriteErrorDeadlockHeld(t *testing.T) {
	multiBatchDeadlock(t, true)
}

// multiBatchDeadlock runs an Add of 4 items in two inserts (multiBatch)
// whose second insert fails with a deadlock: a command
// error, or, writeErrors, a write error of each statement; a Remove of an
// item of the first batch runs before the first insert sent after the
// deadlock, and returns nil; the item must stay removed.
func multiBatchDeadlock(t *testing.T, writeErrors bool) {
	for _, name := range []string{"portable", "counted"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := mongotest.DB(t)
			other := otherWriter(t)
			tp := faults.NewTransient(t)
			var r, remover adder
			var size int
			if name == "portable" {
				cfg := config(1) // an item may take almost 16 MiB
				rp := newRepo[parent, item](t, tp.Client().Database(db.Name()), cfg, portable)
				size = multiBatch(rp)
				r = rp
				remover = newRepo[parent, item](t, other.Database(db.Name()), cfg, portable)
			} else {
				cfg, p := counted(1), subset.PlanFor(mongotest.Server())
				rc := newRepo[countedParent, item](t, tp.Client().Database(db.Name()), cfg, p)
				size = multiBatch(rc)
				r = rc
				remover = newRepo[countedParent, item](t, other.Database(db.Name()), cfg, p)
			}
			insertParents(t, db, "a") // bare: Add stamps it (write 1)
			items := bigItems(10, 4, size)
			x := items[0] // in the first batch, which the server applies
			var inserts atomic.Int32
			var removed error
			after := int32(3) // the first insert after the deadlock
			if writeErrors {
				after++ // after the insert in another collection
			}
			mongotest.OnCommand(t, db, "insert", func(context.Context) {
				if inserts.Add(1) == after {
					removed = remover.Remove(ctx, "a", x.ID)
				}
			})
			// Writes: the stamp, the first batch, the second batch: a
			// command error when odd, write errors when even (see
			// faults.TransientProxy.forge), after a write of another
			// collection.
			if writeErrors {
				tp.Arm(4)
				_, err := tp.Client().Database(db.Name()).Collection("other").InsertOne(ctx, bson.D{})
				require.NoError(t, err)
			} else {
				tp.Arm(3)
			}
			err := r.Add(ctx, "a", items...)
			writes, forged := tp.Counts()
			t.Logf("Add: %v; writes %d, forged %d", err, writes, forged)
			require.Equal(t, 1, forged, "the second batch failed with a deadlock")
			require.NoError(t, err)
			require.NoError(t, removed, "the Remove found x, which the first batch stored, and deleted it")
			t.Logf("inserts sent: %d after the deadlock", inserts.Load()-after+1)
			n, err := db.Collection("items").CountDocuments(ctx, bson.D{{Key: "_id", Value: x.ID}})
			require.NoError(t, err)
			require.Zero(t, n, "x stays removed: the Remove came after the Add's insert of it, and returned nil")
		})
	}
}

// TestAttackAddMultiBatchCommandDeadlockMiscounted: patterns.Operation's
// Documents is "the number of documents the operation wrote (inserted,
// updated, deleted, migrated)". An Add of 4 items of 12.5 MB whose second
// insert (the driver's split, see
// TestAttackAddMultiBatchCommandDeadlockResendsApplied) fails with a
// command error stores its 4 items as a healthy Add does, but counts 3
// documents fewer: those of the first insert, which applied, are not
// counted (the reply of the failed batch does not say they were), and
// sent again they are duplicates. And the fault harness's promise
// (faults.RunTransient: "sent that write once more, and no other") is
// broken: two inserts follow the deadlock, the first batch sent again.
// Portable plan. Fixed with the batches of 32 MiB.
func TestAttackAddMultiBatchCommandDeadlockMiscounted(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	rec := mongotest.NewRecorder(t)
	cfg := config(1)
	cfg.Hook = rec
	newRepo[parent, item](t, db, config(1), portable)
	insertParents(t, db, "a", "b")
	tp := faults.NewTransient(t)
	r := newRepo[parent, item](t, tp.Client().Database(db.Name()), cfg, portable)
	items := bigItems(10, 4, multiBatch(r))

	require.NoError(t, r.Add(ctx, "b", shifted(items, 100)...))
	ended := rec.Ended()
	require.Len(t, ended, 1)
	healthy, ok := ended[0].Documents()
	require.True(t, ok)
	writes, _ := tp.Counts()
	t.Logf("healthy Add: %d documents written, %d writes", healthy, writes)

	rec.Reset()
	tp.Arm(3) // the stamp, the first batch, the second: a command error
	require.NoError(t, r.Add(ctx, "a", items...))
	sent, forged := tp.Counts()
	require.Equal(t, 1, forged)
	ended = rec.Ended()
	require.Len(t, ended, 1)
	docs, _ := ended[0].Documents()
	n, err := db.Collection("items").CountDocuments(ctx, bson.D{{Key: "parent", Value: "a"}})
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "the 4 items are stored, once each")
	t.Logf("deadlocked Add: %d documents written, %d writes, %d retries", docs, sent, ended[0].Retries())
	assert.Equal(t, healthy, docs, "the documents written: the 4 items and the parent's writes, as the healthy Add's")
	assert.Equal(t, writes+1, sent, "only the failed write sent again (faults.RunTransient's promise)")
}

// TestAttackAddPartialDeadlockIdOfAnotherParent (held): an item whose id
// another parent's item holds, first, and an item whose statement fails
// with a deadlock, last (faults.TransientProxy.ArmPartial): the deadlocked
// one is sent again alone, the taken id read back and inserted again
// (insert's attempt 2), and Add reports patterns.ErrInvalid ("an id
// stored under another parent") having deleted what it inserted.
func TestAttackAddPartialDeadlockIdOfAnotherParent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		seed(t, db, seedParent{id: "a"}, seedParent{id: "b", items: []item{{ID: 20, Score: 5}}})
		tp := faults.NewTransient(t)
		r := faultRepo(tp.Client().Database(db.Name()), p)
		tp.ArmPartial()
		err := r.Add(ctx, "a", item{ID: 20, Score: 1}, item{ID: 21, Score: 2})
		_, forged := tp.Counts()
		require.Equal(t, 1, forged)
		t.Logf("Add: %v", err)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.Empty(t, readSnapshot(t, db, "a").items, "nothing left of the failed Add")
		require.Len(t, readSnapshot(t, db, "b").items, 1)
	})
}

// TestAttackAddPushPastSixteenMiB (outside the commit, found on the way):
// the package documentation ("Size") refuses with patterns.ErrTooLarge an
// item that Cap items of its size would not fit in a parent, and a parent
// whose own fields leave too little room for its subset. An Add of 4
// items of 12.5 MB with Cap 1 is neither: each fits, and so does the
// subset (1 of them), as the portable plan shows. On the push plan the
// update carries every item in its $each (50 MB), past the driver's
// maxMessageSizeBytes (48,000,000), which refuses it
// (driver.ErrDocumentTooLarge, "an inserted document is too large"), and
// Add reports ErrTooLarge, having deleted its items. (FerretDB 2.7 accepts
// an update statement of 20 MB; MongoDB refuses one past 16 MiB.) Fixed:
// items past 16 MiB are put in the subset by a recomputation (pushSize).
func TestAttackAddPushPastSixteenMiB(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		if os.Getenv("MONGOPATTERNS_SOAK") == "" {
			t.Skip("skipped: a long form (50 MB of items), run with MONGOPATTERNS_SOAK set; TestAddPastSixteenMiB is its short form")
		}
		r := newRepo[parent, item](t, db, config(1), p)
		insertParents(t, db, "a")
		err := r.Add(ctx, "a", bigItems(10, 4, 12_500_000)...)
		t.Logf("Add: %v", err)
		require.NoError(t, err, "each item fits (Cap 1), and so does the subset")
		n, err := db.Collection("items").CountDocuments(ctx, bson.D{{Key: "parent", Value: "a"}})
		require.NoError(t, err)
		require.EqualValues(t, 4, n)
	})
}

// TestAttackAddPartialDeadlockConcurrentAdd (held): Add of x and y whose
// y fails with a deadlock (ArmPartial), another Add of y, another version,
// between the two sends. The deadlocked statement sent again meets the
// other's y (a duplicate), which Add keeps ("An item whose id is already
// stored under the parent counts as added ... and keeps its stored
// version"): each item stored once, the subset the first Cap of them.
func TestAttackAddPartialDeadlockConcurrentAdd(t *testing.T) {
	other := otherWriter(t)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		stored := item{ID: 1, Score: 1}
		seed(t, db, seedParent{id: "a", items: []item{stored}})
		tp := faults.NewTransient(t)
		r := faultRepo(tp.Client().Database(db.Name()), p)
		b := faultRepo(other.Database(db.Name()), p)
		x, y, y2 := item{ID: 10, Score: 9}, item{ID: 11, Score: 8}, item{ID: 11, Score: 2}
		var inserts atomic.Int32
		var added error
		mongotest.OnCommand(t, db, "insert", func(hctx context.Context) {
			if inserts.Add(1) == 2 {
				added = b.Add(hctx, "a", y2)
			}
		})
		tp.ArmPartial()
		require.NoError(t, r.Add(ctx, "a", x, y))
		_, forged := tp.Counts()
		require.Equal(t, 1, forged)
		require.NoError(t, added)
		s := readSnapshot(t, db, "a")
		want := []item{stored, x, y2}
		require.Equal(t, byID("a", want), s.items)
		requireSubset(t, "a", s, want)
	})
}
