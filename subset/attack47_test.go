package subset_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// maxInternal is MongoDB's BSONObjMaxInternalSize (src/mongo/bson/util/
// builder.h: BSONObjMaxUserSize + 16 KiB): the largest BSON object the
// server takes, the body of a command and each document of an OP_MSG
// document sequence alike (rpc/op_msg.cpp reads each as a
// Validated<BSONObj>; BSONObj's constructor refuses a larger one with
// 10334 BSONObjectTooLarge). pushSize's own comment names it: "MongoDB
// refuses one past 16 MiB and 16 KiB".
const maxInternal = patterns.MaxDocumentSize + 16*1024

// itemsOfPushSize returns n items of parent "a" whose documents and ids
// take exactly total bytes, as Add's pushSize measures them (the encoded
// document, which holds the parent field, and the id's value).
func itemsOfPushSize(t *testing.T, n, total int) []item {
	t.Helper()
	items := make([]item, n)
	size := 0
	for i := range items {
		items[i] = item{ID: int64(i + 1), Parent: "a", Score: int64(i % 1000), Body: "x"}
		raw, err := bson.Marshal(items[i])
		require.NoError(t, err)
		size += len(raw) + 8
	}
	require.LessOrEqual(t, size, total)
	per := (total - size) / n
	for i := range items {
		items[i].Body += strings.Repeat("y", per)
	}
	items[n-1].Body += strings.Repeat("z", total-size-per*n)
	got := 0
	for _, it := range items {
		raw, err := bson.Marshal(it)
		require.NoError(t, err)
		got += len(raw) + 8
	}
	require.Equal(t, total, got)
	return items
}

// requireCommandsFit fails the test for each command sent (each
// statement of a write) that MongoDB would refuse as past
// BSONObjMaxInternalSize.
func requireCommandsFit(t *testing.T, sent []bson.Raw) {
	t.Helper()
	for _, cmd := range sent {
		name := cmd.Index(0).Key()
		seq := map[string]string{"insert": "documents", "update": "updates", "delete": "deletes"}[name]
		if seq == "" {
			assert.LessOrEqual(t, len(cmd), maxInternal, "the body of a %s command, which MongoDB refuses past %d bytes", name, maxInternal)
			continue
		}
		stmts, _ := cmd.Lookup(seq).Array().Values()
		for i, s := range stmts {
			assert.LessOrEqual(t, len(s.Document()), maxInternal, "statement %d of a %s command, which MongoDB refuses past %d bytes", i, name, maxInternal)
		}
		rest := len(cmd) - len(cmd.Lookup(seq).Array())
		assert.LessOrEqual(t, rest, maxInternal, "the body of a %s command", name)
	}
}

// TestAttack47PushStatementPastMongoDBLimit: Add's godoc promises that
// "Items whose documents and ids take more than 16 MiB
// ([patterns.MaxDocumentSize]), more than one update can carry, are put
// in the subset by a recomputation ... in place of the push and its
// count"; below, the push carries them. pushSize sums the documents and
// the ids' values, but the update statement also holds, per item, the
// type byte, the decimal index key and its NUL of its element in $each,
// and again in the filter's $nin (2 x (2 + digits) bytes: 14 at 10,000
// items), and the count that follows holds them again in its $in and
// $or. So 10,000 items whose pushSize is exactly 16 MiB make an update
// statement of 16 MiB + 117 KB, which MongoDB refuses (10334, which
// srverr.TooLarge classifies as ErrTooLarge: Add deletes the items and
// returns ErrTooLarge for a parent that holds 10 items of 1.6 KB).
// The test measures each command as the driver encoded it.
func TestAttack47PushStatementPastMongoDBLimit(t *testing.T) {
	for _, n := range []int{10_000} {
		t.Run(fmt.Sprintf("%d items", n), func(t *testing.T) {
			ctx := context.Background()
			db := mongotest.DB(t)
			r := newRepo[parent, item](t, db, config(10), pushPlan)
			insertParents(t, db, "a")
			require.NoError(t, r.Add(ctx, "a", item{ID: 1_000_000, Score: -1}), "stamped")
			items := itemsOfPushSize(t, n, patterns.MaxDocumentSize)
			c := mongotest.NewCounter(t, db)
			actx, cancel := context.WithTimeout(ctx, 90*time.Second) // the count of 10,000 $or alternatives runs for 40 s on FerretDB 2.7, minutes on 1.x
			defer cancel()
			err := r.Add(actx, "a", items...)
			logBig(t, "Add", c, err)
			requireCommandsFit(t, c.Sent())
		})
	}
}

// TestAttack47AddAgainOfLongIDsPastMongoDBLimit: "Retry-safe: after a
// failure at any step, calling Add again with the same items leaves
// exactly one copy of each in each place" and "An item whose id is
// already stored under the parent counts as added by the earlier
// attempt", for an Add that "Items past 32 MiB are inserted with one
// insertMany per 32 MiB" says may be of any size. The first Add of
// 17,000 items with 1,000-byte ids (17 MB of ids) stores them (its insert
// batches of 32 MiB, its subset recomputed: pushSize past 16 MiB). Add
// again: its insert finds every id taken, and insert reads the stored
// versions with one find whose filter holds every id in one $in, 17 MB,
// a command body past BSONObjMaxInternalSize that MongoDB refuses
// (10334), so that Add again fails at every attempt. The deletions of
// insert's undo and takeBack (dropItems, dropThenRecheck) carry every id
// in one $in too.
func TestAttack47AddAgainOfLongIDsPastMongoDBLimit(t *testing.T) {
	if os.Getenv("MONGOPATTERNS_SOAK") == "" {
		t.Skip("skipped: a long form (17 MB of ids, 27 s on FerretDB 1.24), run with MONGOPATTERNS_SOAK set; TestInsertBatches checks the batches of ids")
	}
	{
		plan := subset.PlanFor(mongotest.Server()) // the server's own plan: 17 MB per Add
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[bson.M, bson.M](t, db, config(1), plan)
		insertParents(t, db, "a")
		const n = 17_000
		items := make([]bson.M, n)
		for i := range items {
			items[i] = bson.M{"_id": fmt.Sprintf("%07d", i) + strings.Repeat("i", 993), "score": i}
		}
		// The undo of an Add whose last item is another parent's: its
		// deleteMany holds the 17,000 ids it inserted.
		_, err := db.Collection("items").InsertOne(ctx, bson.D{{Key: "_id", Value: "elsewhere"}, {Key: "parent", Value: "b"}, {Key: "score", Value: 1}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		err = r.Add(ctx, "a", append(slices.Clone(items), bson.M{"_id": "elsewhere", "score": 1})...)
		logBig(t, "Add with a bad id", c, err)
		t.Run("undo", func(t *testing.T) {
			requireCommandsFit(t, c.Sent())
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
		require.NoError(t, r.Add(ctx, "a", items...), "the first Add")
		c.Reset()
		err = r.Add(ctx, "a", items...)
		logBig(t, "Add again", c, err)
		requireCommandsFit(t, c.Sent())
		require.NoError(t, err)
	}
}

// logBig logs the commands c counted, the sizes of those past 1 MB, and
// err.
func logBig(t *testing.T, what string, c *mongotest.Counter, err error) {
	t.Helper()
	var big []string
	for _, cmd := range c.Sent() {
		if len(cmd) > 1<<20 {
			big = append(big, fmt.Sprintf("%s %d bytes", cmd.Index(0).Key(), len(cmd)))
		}
	}
	t.Logf("%s: commands %v; past 1 MB: %v; error: %v", what, c.Commands(), big, err)
}

// TestAttack47HistoriesModelMissableAddBeforeTheDelete: the model's
// change of 5759aa1 lets an Add that overlaps a recreated Add store its
// version of an item of that Add in place of the stored one, at any
// moment of the overlap. Add's godoc names one window alone: "between
// the deletion and the new insert ... another Add of it stores its own
// version, which this Add's insert then finds and keeps", the deletion
// being the clean-up of the recreated Add (dropThenRecheck), which runs
// only after a step of it found the parent deleted, so after the Delete
// started. Here the other Add (score 1) runs and returns before the
// Delete starts: its insert finds x stored (score 3) and keeps it (Add
// is not an upsert), and nothing deletes x before the Delete; a Get
// between that Add and the Delete that sees x with score 1 is a history
// the godoc rules out, which the model accepts.
func TestAttack47HistoriesModelMissableAddBeforeTheDelete(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	history := func(seen string) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 1),
			// The recreated Add: it overlaps the Delete and the creation.
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 2}}}, sout{res: "ok"}, 2, 100),
			// The other Add, over before the Delete starts.
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 5, 8),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: seen}, 9, 9),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 10, 20),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 30, 40),
		}
	}
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		{Name: "the stored version seen before the Delete", History: history("2:3,"), OK: true},
		{Name: "the recreated Add's version missed before the Delete", History: history(""), OK: true},
		{Name: "the other Add's version seen before the Delete, which nothing deleted", History: history("2:1,"), OK: false},
	})
}

// TestAttack47TakenIDsAcrossNumericTypes: the ids an insert finds taken
// are read back (storedItems) and looked for elsewhere (takenElsewhere)
// by bsonid.Key, and the server's unique index and $in compare numbers by
// value: an item int64 7 meets a document whose _id is the double 7.0,
// the int32 7 or the decimal 7. Add's godoc: an id stored under another
// parent (or a document without a parent) is bad input (ErrInvalid);
// one stored under the parent "counts as added by the earlier attempt
// and keeps its stored version".
func TestAttack47TakenIDsAcrossNumericTypes(t *testing.T) {
	dec7, err := bson.ParseDecimal128("7.0")
	require.NoError(t, err)
	for _, held := range []any{int32(7), int64(7), 7.0, dec7} {
		for _, c := range []struct {
			name   string
			holder bson.D // the fields beside _id of the document holding 7
			ok     bool
		}{
			{"another parent's", bson.D{{Key: "parent", Value: "b"}, {Key: "score", Value: 9}}, false},
			{"without a parent", bson.D{{Key: "score", Value: 9}}, false},
			{"the parent's own", bson.D{{Key: "parent", Value: "a"}, {Key: "score", Value: 9}}, true},
		} {
			t.Run(fmt.Sprintf("%T %s", held, c.name), func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), subset.PlanFor(mongotest.Server()))
				insertParents(t, db, "a", "b")
				_, err := db.Collection("items").InsertOne(ctx, append(bson.D{{Key: "_id", Value: held}}, c.holder...))
				if _, isDec := held.(bson.Decimal128); isDec && err != nil {
					t.Skipf("the server does not store a decimal _id: %v", err) // FerretDB 1.x
				}
				require.NoError(t, err)
				n := mongotest.NewCounter(t, db)
				err = r.Add(ctx, "a", item{ID: 7, Score: 1}, item{ID: 8, Score: 2})
				t.Logf("commands: %v", n.Commands())
				if !c.ok {
					require.ErrorIs(t, err, patterns.ErrInvalid)
					require.ErrorContains(t, err, "taken by items that are not the parent's")
					require.Equal(t, int64(1), count(t, db.Collection("items"), bson.D{}), "8 taken back")
					return
				}
				require.NoError(t, err)
				var got bson.M
				require.NoError(t, db.Collection("items").FindOne(ctx, bson.D{{Key: "_id", Value: 7}}).Decode(&got))
				require.EqualValues(t, 9, got["score"], "the stored version kept")
			})
		}
	}
}

// TestAttack47HookCountsOfTheInsert: patterns.Operation.Commands is "the
// number of commands the operation handed to the driver" (all of them
// when the driver neither retries nor splits), and Documents "the number
// of documents the operation wrote". Add's insert in batches, its read of
// ids held elsewhere, and its undo, counted against what a command
// monitor saw.
func TestAttack47HookCountsOfTheInsert(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, c := range []struct {
			name    string
			setup   func(t *testing.T, db *mongo.Database)
			items   []item
			batch   int
			wantErr error
			docs    int64
		}{
			{"four batches", nil, bigItems(1, 4, 1000), 1_500, nil, -1},
			{"an id of another parent", func(t *testing.T, db *mongo.Database) {
				_, err := db.Collection("items").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 2}, {Key: "parent", Value: "b"}, {Key: "score", Value: 1}})
				require.NoError(t, err)
			}, bigItems(1, 3, 10), 0, patterns.ErrInvalid, 4},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				insertParents(t, db, "a", "b")
				rec := mongotest.NewRecorder(t)
				cfg := config(3)
				cfg.Hook = rec
				r := newRepo[parent, item](t, db, cfg, p)
				require.NoError(t, r.Add(ctx, "a", item{ID: 100, Score: 0}), "stamped")
				if c.setup != nil {
					c.setup(t, db)
				}
				if c.batch > 0 {
					subset.SetInsertBatchBytes(r, c.batch)
				}
				rec.Reset()
				err := r.Add(ctx, "a", c.items...)
				if c.wantErr != nil {
					require.ErrorIs(t, err, c.wantErr)
				} else {
					require.NoError(t, err)
				}
				ops := rec.Ended()
				require.Len(t, ops, 1)
				docs, known := ops[0].Documents()
				t.Logf("sent %v; Commands %d; Documents %d (%t)", rec.Sent(ops[0]), ops[0].Commands(), docs, known)
				require.Equal(t, len(rec.Sent(ops[0])), ops[0].Commands(), "the commands handed to the driver, each sent once")
				if c.docs >= 0 {
					require.Equal(t, c.docs, docs, "documents written: the 2 inserted, the 2 deleted (1 and 3)")
				}
			})
		}
	})
}

// TestAttack47DuplicateOfAnotherUniqueIndex: an items collection with a
// unique index of the application's beside Repo.Indexes (here on body).
// Before 5759aa1 the second insert that found the id taken and the read
// that missed it gave ErrInvalid at once ("taken by items that are not
// the parent's"); now Add reads whether another document holds the id,
// finds none (the key taken is not the id), and inserts again 10 times
// (30 commands) before ErrConflict, whose message says the item was
// "found taken, then not stored" and whose godoc says "Add again", which
// fails the same way every time: the item was never stored nor removed.
func TestAttack47DuplicateOfAnotherUniqueIndex(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), subset.PlanFor(mongotest.Server()))
	insertParents(t, db, "a")
	_, err := db.Collection("items").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "body", Value: 1}}, Options: options.Index().SetUnique(true)})
	require.NoError(t, err)
	require.NoError(t, r.Add(ctx, "a", item{ID: 1, Score: 1, Body: "same"}))
	c := mongotest.NewCounter(t, db)
	err = r.Add(ctx, "a", item{ID: 2, Score: 2, Body: "same"})
	t.Logf("%d commands %v: %v", len(c.Commands()), c.Commands(), err)
	// Named since (Add's godoc): a unique index of the application's
	// gives ErrConflict at every attempt, its message saying so.
	require.ErrorIs(t, err, patterns.ErrConflict)
	require.ErrorContains(t, err, "a unique index of the items collection other than the repository's")
}

// TestAttack47AddOfManyTinyItemsCommands: Add's godoc counts the
// commands of the portable path ("four commands ... A read of the
// parent's revision, the insertMany, and the recomputation") and says
// "Items past 32 MiB are inserted with one insertMany per 32 MiB (one
// command more each)". InsertBatchCount+1 items of 40 bytes are sent as two
// insertManys (insertBatchCount, the servers' maxWriteBatchSize), one
// command more that the godoc does not name.
func TestAttack47AddOfManyTinyItemsCommands(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a")
	require.NoError(t, r.Add(ctx, "a", item{ID: -1, Score: 0}), "stamped")
	items := make([]item, subset.InsertBatchCount+1)
	for i := range items {
		items[i] = item{ID: int64(i + 1), Score: int64(i % 5)}
	}
	c := mongotest.NewCounter(t, db)
	require.NoError(t, r.Add(ctx, "a", items...))
	t.Logf("commands: %v", c.Commands())
	// Named since (Add's godoc): one insertMany per 10,000 items.
	require.Equal(t, []string{"find", "insert", "insert", "find", "update"}, c.Commands(), "the portable path's four commands and an insert more, for 10,001 items")
}

// TestAttack47AddOfMoreThan25000Items: Add's godoc promises an Add of
// any number of items ("Items past 32 MiB are inserted with one
// insertMany per 32 MiB"), and insertBatchCount's comment that its
// batches of 100,000 are "far under ... the 100,000 statements of a
// write (... maxWriteBatchSize, which MongoDB and FerretDB report)".
// FerretDB 2.7 reports maxWriteBatchSize 100,000 in hello, so the driver
// does not split, but refuses an insert of more than 25,000 documents:
// "(InvalidLength) Write batch sizes must be between 1 and 25000". Add
// sends it, and fails whatever the plan; nothing is stored.
func TestAttack47AddOfMoreThan25000Items(t *testing.T) {
	for _, n := range []int{25_001} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := context.Background()
			db := mongotest.DB(t)
			// The portable plan: the push plan's count of 25,000 $or
			// alternatives runs for more than 10 minutes on FerretDB 2.7.
			r := newRepo[parent, item](t, db, config(3), portable)
			insertParents(t, db, "a")
			items := make([]item, n)
			for i := range items {
				items[i] = item{ID: int64(i + 1), Score: int64(i % 5)}
			}
			c := mongotest.NewCounter(t, db)
			err := r.Add(ctx, "a", items...)
			t.Logf("commands: %v", c.Commands())
			require.NoError(t, err)
			require.Equal(t, int64(n), count(t, db.Collection("items"), bson.D{}))
		})
	}
}
