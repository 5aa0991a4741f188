package bucket

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/seq"
)

// Summaries yields, for each step [from + k*step, from + (k+1)*step) of
// [from, to) that holds measurements of the series meta, their count and,
// per value field, min, max, sum and mean, in step order. The steps are
// aligned on from (pass midnight in a time zone for days in that zone; a
// step is a fixed duration, so DST days are not 24 hours); the last one
// ends at to. Empty steps are left out.
//
// The numbers are exact (as float64 arithmetic is): a bucket whose
// measurements all fall in one step and inside [from, to) contributes its
// stored summary; every other bucket (one straddling a step boundary, from
// or to, which is every bucket when steps and windows do not align)
// contributes its measurements one by one. A bucket or measurement that
// lacks a value field (ValueFields changed after it was written) makes
// Summaries yield an error rather than a wrong mean.
//
// Where the server has the $group accumulators $min and $max
// ([patterns.FeatureGroupMinMaxAvg]: MongoDB, FerretDB 2.x), it sends one
// aggregate (plus getMores beyond 101 steps) that does all of this on the
// server. Elsewhere (FerretDB 1.x) it computes in the client: one find
// of the bucket summaries without their measurements (plus getMores), and
// one find per 256 buckets (rounded up to whole windows) for the
// measurements of the buckets that do not fit a step; memory holds about
// 256 buckets and the steps they touch.
// Either path reads each bucket as one consistent document, and counts a
// bucket the server returned twice once (the later copy: see
// [Buckets.Range]); writes during the iteration may or may not be
// counted, as with [Buckets.Range].
//
// A bad meta, a zero from or to, to before from, or a step that is not a
// positive whole number of milliseconds yield one [patterns.ErrInvalid]
// error; from == to yields nothing and sends nothing.
func (b *Buckets[M, V]) Summaries(ctx context.Context, meta M, from, to time.Time, step time.Duration) iter.Seq2[Summary, error] {
	return readSeq("Summaries", meta, from, to, checkStep(step), func(r read) iter.Seq2[Summary, error] {
		g, filter := newGrid(r, step), b.s.overlapFilter(r)
		return func(yield func(Summary, error) bool) {
			p, err := b.ready(ctx)
			switch {
			case err != nil:
				yield(Summary{}, failed("Summaries", err))
			case p.serverSummaries:
				g.yieldRows(ctx, b.s.coll, b.s.summaryPipeline(filter, g), b.s.valueFields, yield)
			default:
				b.clientSummaries(ctx, filter, g, yield)
			}
		}
	})
}

// clientSummaries computes Summaries without $min and $max accumulators.
func (b *Buckets[M, V]) clientSummaries(ctx context.Context, filter bson.D, g grid, yield func(Summary, error) bool) {
	const chunk = 256
	acc := &accumulator{grid: g, fields: b.s.valueFields, open: map[bson.DateTime]*tally{}}
	fail := func(err error) { yield(Summary{}, failed("Summaries", err)) }
	var split []bson.ObjectID // buckets to count measurement by measurement
	flush := func() error {
		if len(split) == 0 {
			return nil
		}
		defer func() { split = split[:0] }()
		open := func(ctx context.Context) (*mongo.Cursor, error) {
			return b.s.coll.Find(ctx, byIDs(split), options.Find().SetProjection(onlyPoints()))
		}
		for bk, err := range seq.Cursor[rangeBucket](ctx, open) {
			if err != nil {
				return err
			}
			for _, raw := range bk.Points {
				if err := acc.addPoint(b.s, raw); err != nil {
					return fmt.Errorf("bucket %s: %w", bk.ID.Hex(), err)
				}
			}
		}
		return nil
	}
	// The buckets of one window are held until the next window starts, so
	// that a bucket the find returned twice counts once (see [latest]).
	var window []summaryBucket
	add := func() error {
		for _, bk := range latest(window, func(b *summaryBucket) bson.ObjectID { return b.ID }, func(b *summaryBucket) int { return int(b.Count) }) {
			if !g.within(bk.First, bk.Last) {
				split = append(split, bk.ID)
				continue
			}
			if err := acc.addBucket(bk); err != nil {
				return err
			}
		}
		window = window[:0]
		return nil
	}
	open := func(ctx context.Context) (*mongo.Cursor, error) {
		return b.s.coll.Find(ctx, filter, options.Find().SetSort(byStart()).SetProjection(withoutPoints()))
	}
	n := 0 // buckets read since the last emit
	for bk, err := range seq.Cursor[summaryBucket](ctx, open) {
		if err != nil {
			fail(err)
			return
		}
		if len(window) > 0 && bk.Start != window[0].Start {
			if err := add(); err != nil {
				fail(err)
				return
			}
			if n >= chunk {
				if err := flush(); err != nil {
					fail(err)
					return
				}
				// Later buckets start at bk.Start or after: no measurement
				// of theirs falls in a step that ends by then.
				if !acc.emit(bk.Start, yield) {
					return
				}
				n = 0
			}
		}
		window = append(window, bk)
		n++
	}
	if err := add(); err != nil {
		fail(err)
		return
	}
	if err := flush(); err != nil {
		fail(err)
		return
	}
	acc.emit(math.MaxInt64, yield)
}

// summaryBucket is what the client path reads of a bucket first.
type summaryBucket struct {
	ID      bson.ObjectID `bson:"_id"`
	Start   bson.DateTime `bson:"start"`
	First   bson.DateTime `bson:"first"`
	Last    bson.DateTime `bson:"last"`
	Count   int64         `bson:"count"`
	Summary bson.Raw      `bson:"summary"`
}

// checkStep rejects a step that is not a positive whole number of
// milliseconds.
func checkStep(step time.Duration) error {
	if step <= 0 || step%time.Millisecond != 0 {
		return errs.Invalid("step %v is not a positive whole number of milliseconds", step)
	}
	return nil
}

// grid is the steps of a Summaries call, in milliseconds.
type grid struct {
	from, to bson.DateTime
	step     int64
}

func newGrid(r read, step time.Duration) grid {
	return grid{from: r.from, to: r.to, step: step.Milliseconds()}
}

// stepOf returns the start of the step that holds t (t >= from).
func (g grid) stepOf(t bson.DateTime) bson.DateTime {
	return t - bson.DateTime(int64(t-g.from)%g.step)
}

// within reports whether the times first..last lie in [from, to) and in
// one step, so that a bucket spanning them counts as a whole.
func (g grid) within(first, last bson.DateTime) bool {
	return g.from <= first && last < g.to && g.stepOf(first) == g.stepOf(last)
}

// summary makes the Summary of the step that starts at start.
func (g grid) summary(start bson.DateTime, fields []string, t *tally) Summary {
	end := min(start+bson.DateTime(g.step), g.to)
	s := Summary{Start: start.Time().UTC(), End: end.Time().UTC(), Count: t.count, Values: make(map[string]Stats, len(fields))}
	for i, f := range fields {
		st := t.stats[i]
		st.Mean = st.Sum / float64(t.count)
		s.Values[f] = st
	}
	return s
}

// yieldRows runs a summary pipeline and yields its steps.
func (g grid) yieldRows(ctx context.Context, coll *mongo.Collection, pipeline mongo.Pipeline, fields []string, yield func(Summary, error) bool) {
	open := func(ctx context.Context) (*mongo.Cursor, error) { return coll.Aggregate(ctx, pipeline) }
	for row, err := range seq.Cursor[bson.Raw](ctx, open) {
		if err == nil {
			var s Summary
			if s, err = g.fromRow(row, fields); err == nil {
				if !yield(s, nil) {
					return
				}
				continue
			}
		}
		yield(Summary{}, failed("Summaries", err))
		return
	}
}

// fromRow reads one grouped row of a summary pipeline.
func (g grid) fromRow(row bson.Raw, fields []string) (Summary, error) {
	start, ok := row.Lookup("_id").DateTimeOK()
	if !ok {
		return Summary{}, fmt.Errorf("summary row without a step start: %s", row)
	}
	count, ok := number(row.Lookup("count"))
	if !ok {
		return Summary{}, fmt.Errorf("summary row without a count: %s", row)
	}
	t := &tally{count: int64(count), stats: make([]Stats, len(fields))}
	for i, f := range fields {
		n, _ := number(row.Lookup(column("n", i)))
		if n != count {
			return Summary{}, missingValue(f, bson.DateTime(start))
		}
		st := &t.stats[i]
		var okSum, okMin, okMax bool
		st.Sum, okSum = number(row.Lookup(column("sum", i)))
		st.Min, okMin = number(row.Lookup(column("min", i)))
		st.Max, okMax = number(row.Lookup(column("max", i)))
		if !okSum || !okMin || !okMax {
			return Summary{}, fmt.Errorf("summary row without the sum, min or max of %q: %s", f, row)
		}
	}
	return g.summary(bson.DateTime(start), fields, t), nil
}

func missingValue(field string, step bson.DateTime) error {
	return fmt.Errorf("some measurements of the step at %s have no value %q (was it added to ValueFields after they were written?)", step.Time().UTC().Format(time.RFC3339Nano), field)
}

// tally is the running summary of one step.
type tally struct {
	count int64
	stats []Stats // per value field; Mean is filled in at the end
}

// accumulator sums buckets and measurements into steps for the client
// path, and yields the steps that are complete.
type accumulator struct {
	grid
	fields []string
	open   map[bson.DateTime]*tally // by step start
}

func (a *accumulator) add(at bson.DateTime, count int64, mins, maxs, sums []float64) {
	start := a.stepOf(at)
	t := a.open[start]
	if t == nil {
		t = &tally{stats: make([]Stats, len(a.fields))}
		for i := range t.stats {
			t.stats[i].Min, t.stats[i].Max = math.Inf(1), math.Inf(-1)
		}
		a.open[start] = t
	}
	t.count += count
	for i := range t.stats {
		st := &t.stats[i]
		st.Min, st.Max, st.Sum = min(st.Min, mins[i]), max(st.Max, maxs[i]), st.Sum+sums[i]
	}
}

// addBucket adds a bucket's stored summary; the bucket lies in one step.
func (a *accumulator) addBucket(bk summaryBucket) error {
	mins, maxs, sums := make([]float64, len(a.fields)), make([]float64, len(a.fields)), make([]float64, len(a.fields))
	for i, f := range a.fields {
		var okMin, okMax, okSum bool
		mins[i], okMin = number(bk.Summary.Lookup(f, "min"))
		maxs[i], okMax = number(bk.Summary.Lookup(f, "max"))
		sums[i], okSum = number(bk.Summary.Lookup(f, "sum"))
		if !okMin || !okMax || !okSum {
			return fmt.Errorf("bucket %s: %w", bk.ID.Hex(), missingValue(f, a.stepOf(bk.First)))
		}
	}
	a.add(bk.First, bk.Count, mins, maxs, sums)
	return nil
}

// addPoint adds one measurement, if it lies in [from, to).
func (a *accumulator) addPoint(s *settings, raw bson.Raw) error {
	at, err := timeOf(raw, s.timeField)
	if err != nil || at < a.from || at >= a.to {
		return err
	}
	vals := make([]float64, len(a.fields))
	for i, f := range a.fields {
		if vals[i], err = valueOf(raw, f); err != nil {
			return fmt.Errorf("%w: %v", missingValue(f, a.stepOf(at)), err)
		}
	}
	a.add(at, 1, vals, vals, vals)
	return nil
}

// emit yields, in order, the steps that end by before, and forgets them;
// it reports whether to go on.
func (a *accumulator) emit(before bson.DateTime, yield func(Summary, error) bool) bool {
	for _, start := range slices.Sorted(maps.Keys(a.open)) {
		if int64(start)+a.step > int64(before) {
			break
		}
		t := a.open[start]
		delete(a.open, start)
		if !yield(a.summary(start, a.fields, t), nil) {
			return false
		}
	}
	return true
}
