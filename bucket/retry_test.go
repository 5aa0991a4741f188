package bucket

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

type retryReading struct {
	At time.Time `bson:"at"`
	V  float64   `bson:"v"`
}

var retryConfig = Config{Collection: "readings", TimeField: "at", ValueFields: []string{"v"}, Window: time.Hour, Cap: 4}

func retryPoints(minutes ...int) []Point[string, retryReading] {
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	out := make([]Point[string, retryReading], len(minutes))
	for i, m := range minutes {
		out[i] = Point[string, retryReading]{Meta: "s1", Value: retryReading{At: base.Add(time.Duration(m) * time.Minute), V: float64(m)}}
	}
	return out
}

// TestRetrySendsAgainAsSent: the retry of a failed AddMany whose
// statements' outcome is unknown (a top-up, a new bucket, or the
// one-reading upserts after two lost races) reads which applied and sends
// the others again as they were. Whether the first send never reached
// the server, applied before the retry, or applies late, between the
// retry's read and its sending again, every reading ends stored once;
// but for the one-reading upserts that apply late, which AddMany's godoc
// names as the exception: stored twice.
func TestRetrySendsAgainAsSent(t *testing.T) {
	mongotest.RunPlans(t, planFor, func(t *testing.T, p plan) {
		for _, kind := range []int{topUp, insert, single} {
			for _, fate := range []string{"never", "before", "late"} {
				t.Run(fmt.Sprintf("%s_%s", [...]string{"top-up", "insert", "single"}[kind], fate), func(t *testing.T) {
					testRetry(t, p, kind, fate)
				})
			}
		}
	})
}

func testRetry(t *testing.T, p plan, kind int, fate string) {
	ctx := context.Background()
	db := mongotest.DB(t)
	b, err := New[string, retryReading](db, retryConfig)
	require.NoError(t, err)
	b.planned.Set(forced(p))
	require.NoError(t, patterns.EnsureIndexes(ctx, b.Indexes()...))
	var before []Point[string, retryReading]
	op := retryPoints(10, 11)
	switch kind {
	case topUp:
		// A bucket with room for three, topped up with one: the bucket
		// has room for it again after its first send applied, and only
		// its id in the guard refuses the second.
		before, op = retryPoints(0), retryPoints(10)
	case single:
		before = retryPoints(0, 1)
	}
	if len(before) > 0 {
		require.NoError(t, b.AddMany(ctx, before))
	}

	w, stmts, models := failedCall(t, b, op, kind)
	other := mongotest.NewClient(t).Database(db.Name()).Collection("readings")
	first := func(ctx context.Context) {
		_, err := other.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		require.NoError(t, err, "the first send")
	}
	switch fate {
	case "before":
		first(ctx)
	case "late":
		var once sync.Once
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) { once.Do(func() { first(ctx) }) })
	}

	c := mongotest.NewCounter(t, db)
	sent := c.Count(func() { err = b.AddMany(ctx, op) })
	require.NoError(t, err, "the retry")
	mongotest.Detail(t, "%d statement(s) of unknown outcome; the retry (and the late first send) sent %v", len(stmts), sent)
	require.Equal(t, "find", sent[0], "the retry reads which applied first")
	// Every command the retry (and the late first send) sent goes to one
	// shard, or to the shards of the series, under the key the package
	// documents: nothing is refused, before 7.1 or after.
	for _, cluster := range shard.Clusters(map[string]shard.Key{
		"readings": shard.MustParseKey(bson.D{{Key: "meta", Value: "hashed"}, {Key: "start", Value: 1}}),
	}) {
		c.RequireTargeted(t, cluster, map[string]string{
			"find readings": "the retry's read of the statements that applied names one series: a prefix of the key",
		})
	}
	if fate == "before" {
		require.Equal(t, []string{"find"}, sent, "all applied: nothing to send again")
	}

	times := 1
	if kind == single && fate == "late" {
		times = 2
	}
	requireStored(t, db, before, op, times)
	require.False(t, failedCalls.active() && failedCalls.take(w.key()) != nil, "the retry took the record")
}

// failedCall records, as the failed AddMany call of op on b left it, its
// statements (planned as AddMany plans them, all of kind) as of unknown
// outcome; it returns the call, its statements and their writes.
func failedCall(t *testing.T, b *Buckets[string, retryReading], op []Point[string, retryReading], kind int) (*manyWrite, []statement, []mongo.WriteModel) {
	t.Helper()
	w, err := b.prepare(op)
	require.NoError(t, err)
	require.NoError(t, w.read(context.Background(), w.groups))
	g := w.groups[0]
	if kind == single {
		g.lost = maxLostRaces
	}
	updates, inserts := w.plan(g, nil, nil)
	stmts := append(updates, inserts...)
	rec := &record{}
	var models []mongo.WriteModel
	for _, st := range stmts {
		require.Equal(t, kind, st.kind)
		rec.unknown = append(rec.unknown, st.sentStatement)
		models = append(models, st.model)
	}
	failedCalls.put(w.key(), rec)
	return w, stmts, models
}

// requireStored checks the buckets of db: each within the cap, its count
// its measurements', holding every reading of before once and every one
// of op times times, no other.
func requireStored(t *testing.T, db *mongo.Database, before, op []Point[string, retryReading], times int) {
	t.Helper()
	ctx := context.Background()
	stored := map[time.Time]int{}
	cur, err := db.Collection("readings").Find(ctx, bson.D{})
	require.NoError(t, err)
	var bks []struct {
		Count  int            `bson:"count"`
		Points []retryReading `bson:"measurements"`
	}
	require.NoError(t, cur.All(ctx, &bks))
	for _, bk := range bks {
		require.LessOrEqual(t, bk.Count, retryConfig.Cap)
		require.Len(t, bk.Points, bk.Count)
		for _, r := range bk.Points {
			stored[r.At.UTC()]++
		}
	}
	want := map[time.Time]int{}
	for _, pt := range before {
		want[pt.Value.At] = 1
	}
	for _, pt := range op {
		want[pt.Value.At] = times
	}
	require.Equal(t, want, stored)
}

// TestRetryResentBucketMeetsItsFirstSend: a retry sends a new bucket of
// unknown outcome again as an upsert by its _id. When the first send
// lands while that upsert runs (after its filter matched nothing), the
// server refuses the upsert with a duplicate key on _id: no server
// retries it, its filter holds more than the _id. That proves the bucket
// is there: the retry reads again, finds the statement's id in it, and
// stores its readings no more. (Seen in TestFaultsAddManyUnderDeadlines
// on FerretDB 2: the retry took the refusal for a conflict, and the next
// round topped that very bucket up with its readings, stored twice.)
// The first send lands in the window before the upsert, and the proxy
// answers the upsert as the server does when it lands inside.
func TestRetryResentBucketMeetsItsFirstSend(t *testing.T) {
	mongotest.RunPlans(t, planFor, func(t *testing.T, p plan) {
		ctx := context.Background()
		tp := faults.NewTransient(t)
		db := mongotest.DB(t)
		b, err := New[string, retryReading](tp.Client().Database(db.Name()), retryConfig)
		require.NoError(t, err)
		b.planned.Set(forced(p))
		require.NoError(t, patterns.EnsureIndexes(ctx, b.Indexes()...))
		op := retryPoints(10, 11)
		_, _, models := failedCall(t, b, op, insert)
		other := mongotest.NewClient(t).Database(db.Name()).Collection("readings")
		var once sync.Once
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
			once.Do(func() {
				_, err := other.BulkWrite(ctx, models)
				require.NoError(t, err, "the first send, late")
			})
		})
		tp.ArmDuplicateKey(1)
		require.NoError(t, b.AddMany(ctx, op), "the retry")
		_, forged := tp.Counts()
		require.Equal(t, 1, forged, "the retry's upsert of the bucket met its first send")
		requireStored(t, db, nil, op, 1)
	})
}

// TestJournalKeepsTheLatestFailedCalls: the journal of failed calls keeps
// the records of the last journalCalls calls, naming journalPoints
// measurements at most in all (a larger one alone), forgetting the
// oldest first; a record is taken once.
func TestJournalKeepsTheLatestFailedCalls(t *testing.T) {
	j := newJournal()
	require.False(t, j.active())
	rec := func(n int) *record { return &record{unknown: []sentStatement{{pts: make([]int, n)}}} }
	for i := range journalCalls + 1 {
		j.put(fmt.Sprint(i), rec(1))
	}
	require.True(t, j.active())
	require.Nil(t, j.take("0"), "the oldest went")
	require.NotNil(t, j.take("1"))
	require.Nil(t, j.take("1"), "taken once")
	require.Equal(t, journalCalls-1, j.order.Len())

	j = newJournal()
	j.put("small", rec(10))
	j.put("again", rec(3))
	j.put("again", rec(5)) // replaces
	require.Equal(t, 15, j.points)
	j.put("large", rec(journalPoints-10))
	require.Nil(t, j.take("small"), "past the bound of measurements, the oldest went")
	require.NotNil(t, j.take("again"))
	require.NotNil(t, j.take("large"))
	require.False(t, j.active())
	require.Zero(t, j.points)
	j.put("huge", rec(journalPoints+1))
	require.NotNil(t, j.take("huge"), "a record past the bound alone is kept")
}

// TestSuccessfulCallsAreNotRetries: a call that succeeded leaves no
// record, so the same points sent again are stored again, as two Add
// calls would store them.
func TestSuccessfulCallsAreNotRetries(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	b, err := New[string, retryReading](db, retryConfig)
	require.NoError(t, err)
	b.planned.Set(forced(planFor(mongotest.Server())))
	require.NoError(t, patterns.EnsureIndexes(ctx, b.Indexes()...))
	pts := retryPoints(0, 1, 2)
	require.NoError(t, b.AddMany(ctx, pts))
	require.NoError(t, b.AddMany(ctx, pts))
	n := 0
	for _, err := range b.Range(ctx, "s1", pts[0].Value.At, pts[0].Value.At.Add(time.Hour)) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 6, n)
}
