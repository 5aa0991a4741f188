package versioning_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TracedUser is a User whose migrations leave a trace in the document:
// each step that took effect on the stored document is in Applied once.
type TracedUser struct {
	User    `bson:",inline"`
	Applied []string `bson:"applied"`
}

// TestMigrateAllCancelledThenResumed: documents at versions 1 and 2 (2,000
// on a fast server, 200 on the embedded one, where every guarded write
// scans the collection); the first run is cancelled midway, the second
// finishes. All end at v3 and every stored document went through each of
// its steps exactly once.
func TestMigrateAllCancelledThenResumed(t *testing.T) {
	t.Parallel() // beside TestFaults, which waits on its stalls
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		n := mongotest.Scale(2000, 200)
		batch := n / 8
		docs := make([]any, n)
		for i := range docs {
			id := fmt.Sprintf("u%04d", i)
			if i%2 == 0 {
				docs[i] = v1(id, "Ada Lovelace", "ada@example.com")
			} else {
				docs[i] = v2(id, "Alan Turing", "alan@example.com")
			}
		}
		seed(t, coll, docs...)

		var mu sync.Mutex
		calls := map[string]int{} // in-memory runs of a step, by id and step
		trace := func(step string, up func(*versioning.Doc) error) func(*versioning.Doc) error {
			return func(d *versioning.Doc) error {
				id, _ := d.Get("_id")
				mu.Lock()
				calls[fmt.Sprint(id, " ", step)]++
				mu.Unlock()
				applied, _ := d.Get("applied")
				list, _ := applied.(bson.A)
				d.Set("applied", append(list, step))
				return up(d)
			}
		}
		r := newRepo[TracedUser](t, db, p, versioning.Config{Collection: "users", Current: 3, Migrations: []versioning.Migration{
			{From: 1, Up: trace("1>2", renameMail)},
			{From: 2, Up: trace("2>3", splitName)},
		}})
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))

		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var progress [][2]int
		start := time.Now()
		first, err := r.MigrateAll(cctx, versioning.MigrateOptions{BatchSize: batch, Progress: func(done, total int) {
			progress = append(progress, [2]int{done, total})
			if done >= n/2 {
				cancel()
			}
		}})
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, first.Failed)
		require.Equal(t, [][2]int{{batch, n}, {2 * batch, n}, {3 * batch, n}, {4 * batch, n}}, progress)
		require.Equal(t, n/2, first.Migrated)

		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.EqualValues(t, n/2, s.Versions[3], "the first run stopped midway")

		second, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: batch})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: n / 2}, second, "the second run finishes the rest, and only the rest")
		mongotest.Detail(t, "2 runs over %d documents: %v", n, time.Since(start))

		s, err = r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, versioning.Stats{Versions: map[int]int64{3: int64(n)}}, s)

		seen := 0
		for u, err := range r.Find(ctx, nil) {
			require.NoError(t, err)
			var i int
			_, err := fmt.Sscanf(u.ID, "u%d", &i)
			require.NoError(t, err)
			want := []string{"2>3"}
			if i%2 == 0 {
				want = []string{"1>2", "2>3"}
			}
			require.Equal(t, want, u.Applied, "%s: each step applied once", u.ID)
			require.Equal(t, "en", u.Locale)
			seen++
		}
		require.Equal(t, n, seen)
		extra := 0
		for _, c := range calls {
			extra += c - 1
		}
		require.Zero(t, extra, "cancelled between batches, no step even ran twice in memory")
	})
}

// TestMigrateAllSkipsWhatAWriterChanged: a document written by someone else
// between the scan and the write is skipped, and keeps the write.
func TestMigrateAllSkipsWhatAWriterChanged(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		seed(t, coll, v1("a", "Ada Lovelace", "ada@example.com"), v1("b", "Alan Turing", "alan@example.com"), v2("c", "Grace Hopper", "g@example.com"))
		var r *versioning.Repo[User]
		var wrote atomic.Bool
		r = newUsers(t, db, p, func(c *versioning.Config) {
			c.Migrations[0].Up = func(d *versioning.Doc) error {
				// Another instance of the service updates b meanwhile: it
				// migrates b itself (running this step again), then
				// applies the increment.
				if id, _ := d.Get("_id"); id == "b" && wrote.CompareAndSwap(false, true) {
					require.NoError(t, r.Update(ctx, "b", incVisits))
				}
				return renameMail(d)
			}
		})
		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: 2, Skipped: 1}, res)
		b, err := r.Get(ctx, "b")
		require.NoError(t, err)
		require.Equal(t, User{ID: "b", First: "Alan", Last: "Turing", Email: "alan@example.com", Locale: "en", Visits: 1}, b)
	})
}

// TestMigrateAllWritePaths runs MigrateAll's write path of each plan: one
// bulk write per batch (BulkMigrate) or one replaceOne per document. Each
// counts migrated and skipped documents exactly. Where the server's own
// plan writes one document at a time, the bulk path runs too, in batches
// of 10, far under the statement count that stalls FerretDB 1.x (see
// patterns.FeatureBatchedUpdates), so that its counting is checked on
// every server.
func TestMigrateAllWritePaths(t *testing.T) {
	run := func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		const n = 40
		seedNumbered(t, db.Collection("users"), n)
		var wrote atomic.Bool
		var r *versioning.Repo[User]
		r = newUsers(t, db, p, func(c *versioning.Config) {
			c.Migrations[1].Up = func(d *versioning.Doc) error {
				if id, _ := d.Get("_id"); id == "u17" && wrote.CompareAndSwap(false, true) {
					require.NoError(t, r.Update(ctx, "u17", incVisits))
				}
				return splitName(d)
			}
		})
		c := mongotest.NewCounter(t, db)
		var batches int
		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 10, Progress: func(int, int) { batches++ }})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: n - 1, Skipped: 1}, res, "u17 was migrated by the concurrent Update")
		require.Equal(t, n/10, batches)
		writes := 0
		for _, name := range c.Commands() {
			if name == "update" {
				writes++
			}
		}
		// The concurrent Update sends three updates (the update that
		// misses, the write-back, the update) where the server limits
		// sizes, one elsewhere (the write-back; the update is a
		// findAndModify).
		concurrent := 1
		if p.ServerSizeLimit {
			concurrent = 3
		}
		want := n/10 + concurrent // a bulk write per batch
		if !p.BulkMigrate {
			want = n + concurrent // a replaceOne per document
		}
		require.Equal(t, want, writes)

		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, map[int]int64{3: n}, s.Versions)
		u, err := r.Get(ctx, "u17")
		require.NoError(t, err)
		require.Equal(t, 1, u.Visits)
	}
	mongotest.RunPlans(t, versioning.PlanFor, run)
	if own := serverPlan(); !own.BulkMigrate {
		t.Run("bulk in small batches", func(t *testing.T) {
			own.BulkMigrate = true
			run(t, own)
		})
	}
}

// TestMigrateAllReportsWriteErrors: a migrated document the server refuses
// (a unique index) is a failure with its id; the others are migrated. (The
// bulk path runs only where the server has patterns.FeatureBatchedUpdates:
// FerretDB 1.x fails a whole update command on a unique-index violation
// instead of reporting a write error.)
func TestMigrateAllReportsWriteErrors(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		const n = 20
		seedNumbered(t, coll, n)
		// Every document holds a distinct "first" before the migration (a
		// unique index refuses documents that lack the field: they all
		// index as null), and two migrate to the same one.
		for i := range n {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("u%02d", i)}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "first", Value: fmt.Sprintf("seed%02d", i)}}}})
			require.NoError(t, err)
		}
		_, err := coll.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"u05", "u06"}}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Twin Same"}}}})
		require.NoError(t, err)
		_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "first", Value: 1}}, Options: options.Index().SetUnique(true)})
		require.NoError(t, err)
		r := newUsers(t, db, p)

		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 10})
		require.ErrorIs(t, err, versioning.ErrMigration)
		require.Equal(t, n-1, res.Migrated)
		require.Len(t, res.Failed, 1)
		require.Contains(t, []any{"u05", "u06"}, res.Failed[0].ID)
		require.ErrorContains(t, res.Failed[0].Err, "write the migrated document")
		require.ErrorContains(t, err, fmt.Sprintf("versioning: MigrateAll: collection users: 1 documents failed, the first %q: write the migrated document: ", res.Failed[0].ID))
		raw := stored(t, coll, res.Failed[0].ID)
		_, err = raw.LookupErr("schemaVersion")
		require.Error(t, err, "the refused document is untouched")
	})
}

// TestMigrateAllAllocatesAsDocumentsArrive: a huge BatchSize bounds the
// batch, it does not size the memory: over one document, MigrateAll
// allocates what that document needs, not BatchSize slots.
func TestMigrateAllAllocatesAsDocumentsArrive(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		seedNumbered(t, coll, 1)
		r := newUsers(t, db, p)
		_, err := r.Stats(ctx) // the connection is warm
		require.NoError(t, err)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 1 << 22})
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: 1}, res)
		allocated := after.TotalAlloc - before.TotalAlloc
		mongotest.Detail(t, "MigrateAll of 1 document with BatchSize 1<<22 allocated %d bytes", allocated)
		require.Less(t, allocated, uint64(1<<20), "allocated %d bytes for one document", allocated)
	})
}

func TestMigrateAllRejectsBadOptions(t *testing.T) {
	db, coll := usersDB(t)
	seedNumbered(t, coll, 1)
	r := newUsers(t, db, serverPlan())
	c := mongotest.NewCounter(t, db)
	for _, o := range []versioning.MigrateOptions{
		{BatchSize: -1},
		{BatchSize: math.MaxInt32 + 1},
		{MaxFailures: -1},
	} {
		res, err := r.MigrateAll(context.Background(), o)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%+v", o)
		require.Zero(t, res)
	}
	require.Empty(t, c.Commands(), "nothing is sent")
	res, err := r.MigrateAll(context.Background(), versioning.MigrateOptions{BatchSize: math.MaxInt32})
	require.NoError(t, err, "BatchSize may be MaxInt32")
	require.Equal(t, versioning.MigrateResult{Migrated: 1}, res)
}
