package bucket_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// hookRow is one call of an exported method of a store (a case of it,
// when named), as its hook sees it: whether it sends nothing, the
// documents it writes (-1: a read, which reports none) and its outcome
// (see patterns.Operation.Outcome).
type hookRow[S any] struct {
	method, name string
	sendsNothing bool
	docs         int64
	outcome      error
	call         func(ctx context.Context, s S) error
}

// runHookRows runs each row as a subtest, in order, against s, whose hook
// is rec, and checks what the hook saw: the operation reported once,
// its commands those sent with its context (RequireReports), the path
// (native or portable, and its features), the documents written and the
// outcome. It returns the methods the rows cover.
func runHookRows[S any](t *testing.T, rec *mongotest.Recorder, s S, path string, features []patterns.Feature, rows []hookRow[S]) map[string]bool {
	t.Helper()
	ctx := context.Background()
	covered := map[string]bool{}
	for _, row := range rows {
		covered[row.method] = true
		t.Run(strings.TrimSuffix(row.method+"/"+row.name, "/"), func(t *testing.T) {
			op := rec.RequireReports(t, "bucket", row.method, row.sendsNothing, func() error { return row.call(ctx, s) })
			require.Equal(t, path, op.Plan)
			require.Equal(t, features, op.Features)
			require.Equal(t, row.outcome, op.Outcome())
			if row.sendsNothing {
				require.Zero(t, op.Commands())
			}
			n, known := op.Documents()
			if row.docs < 0 {
				require.False(t, known, "a read reports no documents, got %d", n)
			} else {
				require.True(t, known, "the documents written are reported")
				require.Equal(t, row.docs, n)
			}
			require.Zero(t, op.Retries())
			require.Zero(t, op.Conflicts())
		})
	}
	return covered
}

// hookPoints are readings of series s at the given minutes.
func hookPoints(s string, minutes ...int) []bucket.Point[string, reading] {
	out := make([]bucket.Point[string, reading], len(minutes))
	for i, m := range minutes {
		out[i] = bucket.Point[string, reading]{Meta: s, Value: readingAt(at(time.Duration(m)*time.Minute), m)}
	}
	return out
}

// TestEveryOperationReports: every exported method of Buckets and of
// TimeSeries that may send a command reports one operation to the
// store's hook per call (an iterator: per iteration), on every plan, with
// the path the store's type takes, the commands it sent with the
// operation's context, the documents it wrote and its outcome (rows of
// bad input, a missing series and a server without time-series
// collections among them); Indexes sends nothing and reports nothing.
func TestEveryOperationReports(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		t.Run("Buckets", func(t *testing.T) {
			rec := mongotest.NewRecorder(t)
			cfg := config(10)
			cfg.Hook = rec
			s, _ := newBuckets(t, p, cfg)
			ctx := context.Background()
			// s1: one bucket of hour 0 holding 5 readings; s2: one.
			require.NoError(t, s.AddMany(ctx, append(hookPoints("s1", 0, 1, 2, 3, 4), hookPoints("s2", 0)...)))
			bad := readingAt(at(0), 0)
			bad.Temp = math.NaN()
			type B = *bucket.Buckets[string, reading]
			rows := []hookRow[B]{
				{method: "Add", docs: 1, call: func(ctx context.Context, s B) error {
					return s.Add(ctx, "s1", readingAt(at(10*time.Minute), 10))
				}},
				{method: "Add", name: "zero time", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s B) error {
					return s.Add(ctx, "s1", reading{})
				}},
				// A top-up of the bucket of hour 0 and a new bucket of hour 1.
				{method: "AddMany", docs: 2, call: func(ctx context.Context, s B) error {
					return s.AddMany(ctx, hookPoints("s1", 20, 21, 60, 61, 62))
				}},
				{method: "AddMany", name: "NaN", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s B) error {
					return s.AddMany(ctx, append(hookPoints("s1", 30), bucket.Point[string, reading]{Meta: "s1", Value: bad}))
				}},
				{method: "Range", docs: -1, call: func(ctx context.Context, s B) error {
					return firstErr(s.Range(ctx, "s1", at(0), at(2*time.Hour)))
				}},
				{method: "Range", name: "to before from", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s B) error {
					return firstErr(s.Range(ctx, "s1", at(time.Hour), at(0)))
				}},
				{method: "Range", name: "empty interval", sendsNothing: true, docs: -1, call: func(ctx context.Context, s B) error {
					return firstErr(s.Range(ctx, "s1", at(time.Hour), at(time.Hour)))
				}},
				{method: "Summaries", docs: -1, call: func(ctx context.Context, s B) error {
					return firstErr(s.Summaries(ctx, "s1", at(0), at(2*time.Hour), time.Hour))
				}},
				{method: "Summaries", name: "zero step", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s B) error {
					return firstErr(s.Summaries(ctx, "s1", at(0), at(2*time.Hour), 0))
				}},
				{method: "SummariesBySeries", docs: -1, call: func(ctx context.Context, s B) error {
					return firstErr(s.SummariesBySeries(ctx, at(0), at(2*time.Hour)))
				}},
				{method: "Latest", docs: -1, call: func(ctx context.Context, s B) error {
					_, err := s.Latest(ctx, "s1")
					return err
				}},
				{method: "Latest", name: "missing series", docs: -1, outcome: patterns.ErrNotFound, call: func(ctx context.Context, s B) error {
					_, err := s.Latest(ctx, "s9")
					return err
				}},
				{method: "DeleteSeriesBefore", docs: 1, call: func(ctx context.Context, s B) error {
					return s.DeleteSeriesBefore(ctx, "s2", at(2*time.Hour))
				}},
				{method: "DeleteBefore", name: "zero time", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s B) error {
					return s.DeleteBefore(ctx, time.Time{})
				}},
				// The bucket of hour 0 of s1; that of hour 1 stays.
				{method: "DeleteBefore", docs: 1, call: func(ctx context.Context, s B) error {
					return s.DeleteBefore(ctx, at(time.Hour))
				}},
			}
			path, features := bucket.BucketsPath(p)
			covered := runHookRows(t, rec, s, path, features, rows)
			mongotest.RequireEveryOperation(t, s, covered, "Indexes")
		})

		t.Run("TimeSeries", func(t *testing.T) {
			rec := mongotest.NewRecorder(t)
			path, features := bucket.TimeSeriesPath(p)
			cfg := config(0)
			if !slices.Contains(features, patterns.FeatureTimeSeriesCustomBucketing) {
				cfg.Granularity = bucket.Minutes
			}
			cfg.Hook = rec
			s, err := bucket.NewTimeSeries[string, reading](mongotest.DB(t), cfg)
			require.NoError(t, err)
			bucket.ForceTimeSeriesPlan(s, p)
			type T = *bucket.TimeSeries[string, reading]
			rows := []hookRow[T]{
				// The first creates the collection.
				{method: "Add", docs: 1, call: func(ctx context.Context, s T) error {
					return s.Add(ctx, "s1", readingAt(at(0), 0))
				}},
				{method: "AddMany", docs: 3, call: func(ctx context.Context, s T) error {
					return s.AddMany(ctx, append(hookPoints("s1", 1, 2), hookPoints("s2", 0)...))
				}},
				{method: "Range", docs: -1, call: func(ctx context.Context, s T) error {
					return firstErr(s.Range(ctx, "s1", at(0), at(time.Hour)))
				}},
				{method: "Range", name: "to before from", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s T) error {
					return firstErr(s.Range(ctx, "s1", at(time.Hour), at(0)))
				}},
				{method: "Summaries", docs: -1, call: func(ctx context.Context, s T) error {
					return firstErr(s.Summaries(ctx, "s1", at(0), at(time.Hour), time.Minute))
				}},
				{method: "SummariesBySeries", docs: -1, call: func(ctx context.Context, s T) error {
					return firstErr(s.SummariesBySeries(ctx, at(0), at(time.Hour)))
				}},
				{method: "Latest", docs: -1, call: func(ctx context.Context, s T) error {
					_, err := s.Latest(ctx, "s1")
					return err
				}},
				{method: "Latest", name: "missing series", docs: -1, outcome: patterns.ErrNotFound, call: func(ctx context.Context, s T) error {
					_, err := s.Latest(ctx, "s9")
					return err
				}},
				{method: "DeleteBefore", name: "zero time", sendsNothing: true, docs: -1, outcome: patterns.ErrInvalid, call: func(ctx context.Context, s T) error {
					return s.DeleteBefore(ctx, time.Time{})
				}},
				{method: "DeleteSeriesBefore", docs: 1, call: func(ctx context.Context, s T) error {
					return s.DeleteSeriesBefore(ctx, "s2", at(time.Hour))
				}},
				{method: "DeleteBefore", docs: 3, call: func(ctx context.Context, s T) error {
					return s.DeleteBefore(ctx, at(time.Hour))
				}},
			}
			// Where the plan lacks time-series collections (or, for the
			// deletes, deletes by time), a method refuses, sending
			// nothing (the collection exists from the first row where it
			// has them), unless it found bad input first.
			has := bucket.HasTimeSeries(p)
			deletes := slices.Contains(features, patterns.FeatureTimeSeriesDeletes)
			for i, r := range rows {
				refused := !has || !deletes && strings.HasPrefix(r.method, "Delete")
				if refused && r.outcome != patterns.ErrInvalid {
					rows[i] = hookRow[T]{method: r.method, name: r.name, sendsNothing: true, docs: -1, outcome: patterns.ErrUnsupported, call: r.call}
				}
			}
			covered := runHookRows(t, rec, s, path, features, rows)
			mongotest.RequireEveryOperation(t, s, covered, "Indexes")
		})
	})
}

// TestHookSeesLostRaces: a top-up of AddMany whose room another writer
// takes between AddMany's read and its write is refused by its guard: the
// hook sees one conflict, as it happens, and the operation goes on (it
// reads again, tops up what is left and opens a bucket for the rest: the
// scenario of TestAddManyLostRace).
func TestHookSeesLostRaces(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		rec := mongotest.NewRecorder(t)
		cfg := config(10)
		cfg.Hook = rec
		s, db := newBuckets(t, p, cfg)
		require.NoError(t, s.AddMany(ctx, hookPoints("s1", 0, 1, 2, 3, 4, 5)))
		other, err := bucket.New[string, reading](mongotest.NewClient(t).Database(db.Name()), config(10))
		require.NoError(t, err)
		var updates atomic.Int32
		mongotest.OnCommand(t, db, "update", func(context.Context) {
			if updates.Add(1) == 1 {
				// Not the operation's context: the hook counts the
				// commands sent with it.
				require.NoError(t, other.Add(context.Background(), "s1", readingAt(at(50*time.Minute), 50)))
			}
		})
		op := rec.RequireReports(t, "bucket", "AddMany", false, func() error {
			return s.AddMany(ctx, hookPoints("s1", 6, 7, 8, 9, 10, 11, 12, 13))
		})
		require.Equal(t, 1, op.Conflicts())
		require.Equal(t, []patterns.Event{{Kind: patterns.EventConflict}}, rec.Events(op))
		require.Zero(t, op.Retries())
		require.Equal(t, 5, op.Commands(), "find, the refused top-up, find, top-up, insert")
		n, _ := op.Documents()
		require.EqualValues(t, 2, n, "the top-up of the bucket with room and a new bucket")
	})
}

// TestHookSeesRetries: a write that FerretDB 2.x aborts on a deadlock
// (forged by faults.TransientProxy) is sent again; the hook sees the retry,
// with the failure, and both commands.
func TestHookSeesRetries(t *testing.T) {
	tp := faults.NewTransient(t)
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		rec := mongotest.NewRecorder(t)
		cfg := config(10)
		cfg.Hook = rec
		s := newBucketsOn(t, tp.Client().Database(mongotest.DB(t).Name()), p, cfg)
		type B = *bucket.Buckets[string, reading]
		for _, c := range []struct {
			method string
			docs   int64
			call   func(ctx context.Context, s B) error
		}{
			{"Add", 1, func(ctx context.Context, s B) error { return s.Add(ctx, "s1", readingAt(at(0), 0)) }},
			{"AddMany", 1, func(ctx context.Context, s B) error { return s.AddMany(ctx, hookPoints("s2", 0, 1)) }},
			{"DeleteBefore", 2, func(ctx context.Context, s B) error { return s.DeleteBefore(ctx, at(time.Hour)) }},
		} {
			t.Run(c.method, func(t *testing.T) {
				tp.Arm(1)
				defer tp.Arm(0)
				op := rec.RequireReports(t, "bucket", c.method, false, func() error { return c.call(context.Background(), s) })
				require.NoError(t, op.Err)
				_, forged := tp.Counts()
				require.Equal(t, 1, forged)
				require.Equal(t, 1, op.Retries())
				events := rec.Events(op)
				require.Len(t, events, 1)
				require.Equal(t, patterns.EventRetry, events[0].Kind)
				require.ErrorContains(t, events[0].Err, "deadlock detected")
				n, _ := op.Documents()
				require.Equal(t, c.docs, n)
			})
		}
	})
}
