package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The random histories of Buckets (internal/chaos): four clients, each a
// store of its own on a connection pool of its own (two of them under a
// storm of faults), run random mixes of Add, AddMany (called again with
// the same points after an error, as its godoc says, up to three times),
// Range, Latest, Summaries and DeleteBefore on two series of three hourly
// windows, with a cap of 3, so that windows hold several buckets, full
// and partial, and concurrent writers race for their room. A measurement
// is told by its Hum, unique in the history, and its time is unique too
// (a minute of the three hours plus its id in milliseconds).
//
// The model is per measurement: porcupine partitions the history by
// measurement, each a count (0 or 1). A write applies to each of its
// measurements at one instant of its call (one statement per bucket);
// DeleteBefore at a window boundary t deletes exactly the buckets of the
// windows before t (a bucket's last is before t exactly then), each at an
// instant of its call; a read sees each measurement at one instant of its
// call (Range and Latest read each bucket as one consistent document).
// The godoc promises no more across buckets: a window of several buckets
// is read bucket by bucket. Summaries is checked at rest, against Range.
//
// AddMany called again after an error stores exactly what the failed call
// did not, but for the two exceptions of its godoc, which the model
// encodes as they look to the caller, who knows only which measurements
// were of unknown outcome. Each call that left a measurement of unknown
// outcome sent it once (or again) in a statement that may apply at any
// instant after the call began, or never (the second exception: the
// one-measurement upserts after two lost races, whose first send lands
// after the retry read, store it once more for each such send). The
// retry that next settles it (its read finds the statement applied, or it
// sends it again) stores it at one instant of that retry exactly when it
// is stored nowhere then: a DeleteBefore between the first send and the
// retry's read removed it, and the retry stores it again (the first
// exception).

// bm is one measurement: its id (Hum), series and time.
type bm struct {
	id     int
	series string
	at     time.Time
}

func (m bm) reading() reading {
	return reading{At: m.at, Temp: float64(m.id%97)/4 - 5, Hum: int64(m.id)}
}

// bop is one drawn operation.
type bop struct {
	op     string // add, addmany, range, latest, summaries, delete
	pts    []bm   // add, addmany
	series string // range, latest, summaries
	from   time.Time
	to     time.Time // range, summaries; delete: its t
}

// bout is what an operation returned: for a write, the ids stored, not
// stored and of unknown outcome; for a read, the ids seen.
type bout struct {
	stored, failed, unknown []int
	// An AddMany called again after errors: how many of its calls left
	// each measurement of unknown outcome, and for one stored in the end,
	// when the call that settled it began, counted from the operation's
	// call (measured inside it: no later than the true start).
	sends    map[int]int
	settled  map[int]time.Duration
	seen     []int // range: with repeats; latest: the newest, or none
	notFound bool  // latest: ErrNotFound
}

// bsub is one operation's part on one measurement, in its partition.
type bsub struct {
	kind string // add, settle (an AddMany retry's: add unless stored), delete, read
	seen int    // read: how many times the measurement was seen
}

// bucketHistories is the per-measurement model (see above).
var bucketHistories = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		all := map[int]bm{}
		for _, o := range history {
			for _, m := range o.Input.(bop).pts {
				all[m.id] = m
			}
		}
		by := map[int][]porcupine.Operation{}
		sub := func(o porcupine.Operation, id int, s bsub, out any) {
			o.Input, o.Output = s, out
			by[id] = append(by[id], o)
		}
		for _, o := range history {
			in := o.Input.(bop)
			out, known := o.Output.(bout)
			switch in.op {
			case "add", "addmany":
				maybe := func(id int) {
					o := o
					o.Return = math.MaxInt64
					sub(o, id, bsub{kind: "add"}, linear.Unknown{})
				}
				for _, m := range in.pts {
					if !known {
						maybe(m.id)
						continue
					}
					for range out.sends[m.id] {
						maybe(m.id)
					}
					switch {
					case out.sends[m.id] > 0 && slices.Contains(out.stored, m.id):
						o := o
						o.Call += out.settled[m.id].Nanoseconds()
						sub(o, m.id, bsub{kind: "settle"}, "ok")
					case out.sends[m.id] > 0:
					case slices.Contains(out.stored, m.id):
						sub(o, m.id, bsub{kind: "add"}, "ok")
					}
				}
			case "delete":
				for id, m := range all {
					if m.at.Before(in.to) {
						sub(o, id, bsub{kind: "delete"}, o.Output)
					}
				}
			case "range":
				if !known {
					continue
				}
				for id, m := range all {
					if m.series == in.series && !m.at.Before(in.from) && m.at.Before(in.to) {
						n := 0
						for _, s := range out.seen {
							if s == id {
								n++
							}
						}
						sub(o, id, bsub{kind: "read", seen: n}, "ok")
					}
				}
			case "latest":
				if !known {
					continue
				}
				for id, m := range all {
					if m.series != in.series {
						continue
					}
					switch {
					case !out.notFound && out.seen[0] == id:
						sub(o, id, bsub{kind: "read", seen: 1}, "ok")
					case out.notFound || m.at.After(all[out.seen[0]].at):
						sub(o, id, bsub{kind: "read", seen: 0}, "ok")
					}
				}
			}
		}
		var parts [][]porcupine.Operation
		for _, id := range slices.Sorted(maps.Keys(by)) {
			parts = append(parts, by[id])
		}
		return parts
	},
	Init: func() []any { return []any{0} },
	Step: func(state, input, output any) []any {
		n, in := state.(int), input.(bsub)
		_, unknown := output.(linear.Unknown)
		switch in.kind {
		case "add":
			if unknown {
				return []any{n, n + 1}
			}
			return []any{n + 1}
		case "settle":
			return []any{max(n, 1)}
		case "delete":
			if unknown {
				return []any{n, 0}
			}
			return []any{0}
		}
		if in.seen != n {
			return nil
		}
		return []any{n}
	},
	DescribeOperation: func(input, output any) string {
		if in, ok := input.(bsub); ok {
			return fmt.Sprintf("%s(seen %d) -> %v", in.kind, in.seen, output)
		}
		in := input.(bop)
		var ids []int
		for _, m := range in.pts {
			ids = append(ids, m.id)
		}
		return fmt.Sprintf("%s %s %v [%s, %s) -> %+v", in.op, in.series, ids, in.from.Format("15:04"), in.to.Format("15:04"), output)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("stored %d times", state.(int)) },
}).ToModel()

const (
	histCap     = 3
	histWindows = 3
)

var histSeries = []string{"s1", "s2"}

// bucketHistory holds each client's store.
type bucketHistory struct {
	p      bucket.Plan
	mu     sync.Mutex
	stores map[*mongo.Database]*bucket.Buckets[string, reading]
}

func histConfig() bucket.Config { return config(histCap) }

// bucketHistSpec is Buckets' random history on plan p.
func bucketHistSpec(p bucket.Plan) chaos.Spec[*bucketHistory, bop] {
	ops := mongotest.Scale(30, 12)
	return chaos.Spec[*bucketHistory, bop]{
		Ops: ops,
		Prepare: func(t *testing.T, db *mongo.Database, _ *rand.Rand) *bucketHistory {
			newBucketsOn(t, db, p, histConfig()) // the indexes
			return &bucketHistory{p: p, stores: map[*mongo.Database]*bucket.Buckets[string, reading]{}}
		},
		Gen: func(rng *rand.Rand, client, i int, _ *bucketHistory) bop {
			point := func(j int) bm {
				id := ((client*ops+i)*4 + j)
				minute := time.Duration(rng.IntN(histWindows*60)) * time.Minute
				return bm{id: id, series: histSeries[rng.IntN(2)], at: base.Add(minute + time.Duration(id)*time.Millisecond)}
			}
			series := histSeries[rng.IntN(2)]
			switch n := rng.IntN(100); {
			case n < 25:
				return bop{op: "add", pts: []bm{point(0)}}
			case n < 50:
				pts := make([]bm, 1+rng.IntN(4))
				for j := range pts {
					pts[j] = point(j)
				}
				return bop{op: "addmany", pts: pts}
			case n < 70:
				from := base.Add(time.Duration(rng.IntN(histWindows*60)) * time.Minute)
				to := from.Add(time.Duration(1+rng.IntN(histWindows*60)) * time.Minute)
				return bop{op: "range", series: series, from: from, to: to}
			case n < 82:
				return bop{op: "latest", series: series}
			case n < 92:
				return bop{op: "summaries", series: series, from: base, to: base.Add(histWindows * time.Hour)}
			default:
				return bop{op: "delete", to: base.Add(time.Duration(1+rng.IntN(histWindows-1)) * time.Hour)}
			}
		},
		Input: func(op bop) any { return op },
		Do: func(ctx context.Context, db *mongo.Database, h *bucketHistory, op bop) (any, error) {
			return bucketHistDo(ctx, h.store(db), op)
		},
		Model: bucketHistories,
		Final: bucketHistFinal,
	}
}

// store returns the client's store on db. Only the client's goroutine
// calls it for its db, but clients share the map.
func (h *bucketHistory) store(db *mongo.Database) *bucket.Buckets[string, reading] {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.stores[db]
	if !ok {
		var err error
		s, err = bucket.New[string, reading](db, histConfig())
		if err != nil {
			panic(err)
		}
		bucket.ForcePlan(s, h.p)
		h.stores[db] = s
	}
	return s
}

// bucketHistDo runs op on s.
func bucketHistDo(ctx context.Context, s *bucket.Buckets[string, reading], op bop) (any, error) {
	ids := func(ms []bm, idx []int) []int {
		var out []int
		for _, i := range idx {
			out = append(out, ms[i].id)
		}
		return out
	}
	switch op.op {
	case "add":
		m := op.pts[0]
		if err := s.Add(ctx, m.series, m.reading()); err != nil {
			return nil, err
		}
		return bout{stored: []int{m.id}}, nil
	case "addmany":
		// AddMany's godoc: after any error, calling it again with the same
		// points stores exactly what the failed call did not, each once,
		// but for its two exceptions (see the model). Three calls at most,
		// the later ones with a fresh deadline; a measurement of unknown
		// outcome in any call but the last stored or not by the last is
		// known, with the calls that left it unknown (sends) and the start
		// of the one that settled it; one that was unknown in an earlier
		// call and that the last lists as Failed (not sent again: it
		// ended before) is unknown.
		pts := make([]bucket.Point[string, reading], len(op.pts))
		for i, m := range op.pts {
			pts[i] = bucket.Point[string, reading]{Meta: m.series, Value: m.reading()}
		}
		began := time.Now()
		var wasUnknown, lastUnknown []int
		sends, settled := map[int]int{}, map[int]time.Duration{}
		for attempt := range 3 {
			if attempt > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
			}
			for _, i := range lastUnknown {
				settled[op.pts[i].id] = time.Since(began)
			}
			err := s.AddMany(ctx, pts)
			if err == nil {
				return bout{stored: ids(op.pts, allIndexes(len(pts))), sends: sends, settled: settled}, nil
			}
			pe, ok := errors.AsType[*bucket.PartialError](err)
			if !ok {
				return nil, err // nothing written by this call; earlier ones unknown
			}
			wasUnknown = append(wasUnknown, pe.Unknown...)
			lastUnknown = pe.Unknown
			for _, i := range pe.Unknown {
				sends[op.pts[i].id]++
			}
			if attempt < 2 {
				continue
			}
			out := bout{sends: sends, settled: settled}
			for i := range pts {
				switch {
				case slices.Contains(pe.Unknown, i), slices.Contains(pe.Failed, i) && slices.Contains(wasUnknown, i):
					out.unknown = append(out.unknown, op.pts[i].id)
				case slices.Contains(pe.Failed, i):
					out.failed = append(out.failed, op.pts[i].id)
				default:
					out.stored = append(out.stored, op.pts[i].id)
				}
			}
			return out, nil
		}
	case "range":
		var seen []int
		var last time.Time
		for r, err := range s.Range(ctx, op.series, op.from, op.to) {
			if err != nil {
				return nil, err
			}
			if r.At.Before(last) {
				return nil, fmt.Errorf("range: %v after %v: not in time order", r.At, last)
			}
			last = r.At
			seen = append(seen, int(r.Hum))
		}
		return bout{seen: seen}, nil
	case "latest":
		r, err := s.Latest(ctx, op.series)
		if errors.Is(err, patterns.ErrNotFound) {
			return bout{notFound: true}, nil
		}
		if err != nil {
			return nil, err
		}
		return bout{seen: []int{int(r.Hum)}}, nil
	case "summaries":
		for _, err := range s.Summaries(ctx, op.series, op.from, op.to, 30*time.Minute) {
			if err != nil {
				return nil, err
			}
		}
		return bout{}, nil
	case "delete":
		if err := s.DeleteBefore(ctx, op.to); err != nil {
			return nil, err
		}
		return "ok", nil
	}
	panic(op.op)
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// bucketHistFinal checks the state at rest: every bucket within the cap
// and consistent with its measurements; each measurement stored at most
// once (but for AddMany's second exception: once more per call that left
// it of unknown outcome), none that no call wrote; one whose call stored
// it and that no DeleteBefore may have removed is there, one that no call
// may have stored is not; Latest is the newest; Summaries (on both steps, aligned
// with the windows and not) and SummariesBySeries equal what the
// measurements give.
func bucketHistFinal(t *testing.T, db *mongo.Database, h *bucketHistory, ops []porcupine.Operation) {
	bks := storedBuckets(t, db)
	checkBuckets(t, bks, histCap, time.Hour)
	count := map[int]int{}
	bySeries := map[string][]reading{}
	for _, b := range bks {
		for _, r := range b.Points {
			count[int(r.Hum)]++
			bySeries[b.Meta] = append(bySeries[b.Meta], r)
		}
	}
	written := map[int]string{} // id -> "stored", "maybe", "failed"
	most := map[int]int{}       // id -> the most times the calls may have stored it
	var deletes []time.Time
	for _, o := range ops {
		in := o.Input.(bop)
		out, known := o.Output.(bout)
		switch in.op {
		case "add", "addmany":
			for _, m := range in.pts {
				most[m.id] = out.sends[m.id]
				switch {
				case !known:
					written[m.id], most[m.id] = "maybe", 1
				case slices.Contains(out.unknown, m.id):
					written[m.id] = "maybe"
				case slices.Contains(out.stored, m.id):
					written[m.id] = "stored"
					most[m.id]++
				default:
					written[m.id] = "failed"
				}
			}
		case "delete":
			deletes = append(deletes, in.to)
		}
	}
	for id, n := range count {
		require.LessOrEqual(t, n, most[id], "measurement %d stored %d times (%s by its call)", id, n, written[id])
	}
	for _, o := range ops {
		for _, m := range o.Input.(bop).pts {
			deletable := slices.ContainsFunc(deletes, func(d time.Time) bool { return m.at.Before(d) })
			if written[m.id] == "stored" && !deletable {
				require.Positive(t, count[m.id], "measurement %d: its call stored it and no DeleteBefore could remove it", m.id)
			}
		}
	}
	s := h.store(db)
	from, to := base, base.Add(histWindows*time.Hour)
	for _, series := range histSeries {
		rs := utc(inRange(bySeries[series], from, to))
		require.Equal(t, rs, utc(collect(t, s.Range(ctx0, series, from, to))), "Range at rest of %s", series)
		latest, err := s.Latest(ctx0, series)
		if len(rs) == 0 {
			require.ErrorIs(t, err, patterns.ErrNotFound)
		} else {
			require.NoError(t, err)
			require.Equal(t, rs[len(rs)-1], utc([]reading{latest})[0], "Latest at rest of %s", series)
		}
		for _, step := range []time.Duration{time.Hour, 25 * time.Minute} {
			require.Equal(t, summarise(rs, from, to, step), collect(t, s.Summaries(ctx0, series, from, to, step)), "Summaries at rest of %s by %s", series, step)
		}
	}
	for _, ss := range collect(t, s.SummariesBySeries(ctx0, from, to)) {
		want := summarise(bySeries[ss.Meta], from, to, to.Sub(from))
		require.Len(t, want, 1)
		require.Equal(t, want[0], ss.Summary, "SummariesBySeries at rest of %s", ss.Meta)
	}
}

var ctx0 = context.Background()

// TestHistories runs random histories of every operation on shared
// series under faults (see bucketHistSpec), on each server path.
func TestHistories(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		chaos.Run(t, bucketHistSpec(p))
	})
}

// TestHistoriesModel: the model rejects a read that misses a stored
// measurement, or sees one twice, and accepts a write of unknown outcome
// either way; an AddMany called again after a call that left the
// measurement of unknown outcome stores it again where a DeleteBefore
// removed it before the retry (its first exception: seed
// 7020193662897902720, portable, FerretDB 2.7), may store it once more
// per such call (its second), and no more.
func TestHistoriesModel(t *testing.T) {
	m := bm{id: 1, series: "s1", at: base.Add(time.Minute)}
	add := porcupine.Operation{Input: bop{op: "add", pts: []bm{m}}, Output: bout{stored: []int{1}}, Call: 0, Return: 1}
	unknown := porcupine.Operation{Input: bop{op: "add", pts: []bm{m}}, Output: linear.Unknown{Err: errors.New("reset")}, Call: 0, Return: math.MaxInt64}
	read := func(seen ...int) porcupine.Operation {
		return porcupine.Operation{Input: bop{op: "range", series: "s1", from: base, to: base.Add(time.Hour)}, Output: bout{seen: seen}, Call: 2, Return: 3}
	}
	del := porcupine.Operation{Input: bop{op: "delete", to: base.Add(time.Hour)}, Output: "ok", Call: 2, Return: 3}
	latest := porcupine.Operation{Input: bop{op: "latest", series: "s1"}, Output: bout{notFound: true}, Call: 4, Return: 5}
	// An AddMany whose first call (from 0) left the measurement of
	// unknown outcome, and whose second, from 10 to 20, stored it.
	retried := porcupine.Operation{Input: bop{op: "addmany", pts: []bm{m}}, Output: bout{stored: []int{1}, sends: map[int]int{1: 1}, settled: map[int]time.Duration{1: 10}}, Call: 0, Return: 20}
	readAt := func(at int64, seen ...int) porcupine.Operation {
		o := read(seen...)
		o.Call, o.Return = at, at+1
		return o
	}
	delAt5 := del // after the reads at 1, before the retry
	delAt5.Call, delAt5.Return = 5, 6
	chaos.CheckModel(t, bucketHistories, []chaos.ModelCase{
		{Name: "seen", History: []porcupine.Operation{add, read(1)}, OK: true},
		{Name: "missed", History: []porcupine.Operation{add, read()}, OK: false},
		{Name: "twice", History: []porcupine.Operation{add, read(1, 1)}, OK: false},
		{Name: "unknown, seen", History: []porcupine.Operation{unknown, read(1)}, OK: true},
		{Name: "unknown, missed", History: []porcupine.Operation{unknown, read()}, OK: true},
		{Name: "deleted", History: []porcupine.Operation{add, del, latest}, OK: true},
		{Name: "not deleted, Latest says none", History: []porcupine.Operation{add, latest}, OK: false},
		{Name: "retried after a delete, stored again", History: []porcupine.Operation{retried, readAt(1, 1), delAt5, readAt(21, 1)}, OK: true},
		{Name: "retried after a delete, missed", History: []porcupine.Operation{retried, readAt(1, 1), delAt5, readAt(21)}, OK: false},
		{Name: "retried, missed", History: []porcupine.Operation{retried, readAt(21)}, OK: false},
		{Name: "retried, seen twice", History: []porcupine.Operation{retried, readAt(21, 1, 1)}, OK: true},
		{Name: "retried, seen twice before the retry", History: []porcupine.Operation{retried, readAt(5, 1, 1)}, OK: false},
		{Name: "retried, seen three times", History: []porcupine.Operation{retried, readAt(21, 1, 1, 1)}, OK: false},
		{Name: "stored at once, seen again after a delete", History: []porcupine.Operation{add, readAt(1, 1), delAt5, readAt(21, 1)}, OK: false},
	})
}
