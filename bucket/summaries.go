package bucket

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/patterns"
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
// Summaries yield an error wrapping [patterns.ErrInvalid] rather than a
// wrong mean.
//
// Where the server has the $group accumulators $min and $max
// ([patterns.FeatureGroupMinMaxAvg]: MongoDB, FerretDB 2.x), it sends one
// aggregate (plus getMores beyond 101 steps) that does all of this on the
// server. Elsewhere (FerretDB 1.x) it computes in the client from one
// find of the buckets, measurements and all (plus getMores): on FerretDB
// 1.x a second find, of the measurements of the buckets that do not fit
// a step only, would cost as much as the first, whatever its filter.
// Memory holds the buckets of one window and the steps they touch; a
// step is yielded once the buckets read are past it.
// Either path reads each bucket as one consistent document, and counts a
// bucket the server returned twice once (the later copy: see
// [Buckets.Range]); writes during the iteration may or may not be
// counted, as with [Buckets.Range].
//
// A bad meta, a zero from or to, to before from, or a step that is not a
// positive whole number of milliseconds yield one [patterns.ErrInvalid]
// error; from == to yields nothing and sends nothing.
func (b *Buckets[M, V]) Summaries(ctx context.Context, meta M, from, to time.Time, step time.Duration) iter.Seq2[Summary, error] {
	return readSeq(ctx, b, "Summaries", meta, from, to, checkStep(step), func(r read) iter.Seq2[Summary, error] {
		g, filter := newGrid(r, step), b.s.overlapFilter(r)
		return func(yield func(Summary, error) bool) {
			ctx, op := b.start(ctx, "Summaries")
			out, errp := observe(op, yield)
			defer op.Finish(errp)
			p, err := b.ready(ctx)
			switch {
			case err != nil:
				out(Summary{}, failed("Summaries", err))
			case p.serverSummaries:
				yieldRows(ctx, "Summaries", b.s.coll, b.s.summaryPipeline(filter, g), g.stepRow(b.s.valueFields), out)
			default:
				open := func(ctx context.Context) (*mongo.Cursor, error) {
					return b.s.coll.Find(ctx, filter, options.Find().SetSort(byStart()).SetProjection(withoutWrites()))
				}
				b.clientSummaries(ctx, "Summaries", open, g, false, func(_ bson.RawValue, s Summary, err error) bool { return out(s, err) })
			}
		}
	})
}

// SeriesSummary is the summary of one series over an interval, as
// [Store.SummariesBySeries] yields it.
type SeriesSummary[M any] struct {
	Meta M
	Summary
}

// SummariesBySeries yields, for each series with measurements in [from,
// to), their count and, per value field, min, max, sum and mean: what
// Summaries(ctx, meta, from, to, to.Sub(from)) yields for each series
// (a fleet view: one summary per sensor over the last hour), in the
// order of the metas as the server sorts BSON values (a struct meta is
// stored with its keys sorted, so it sorts by its fields in name order).
// It is exact as
// Summaries is, by the same rules (a bucket inside [from, to) contributes
// its stored summary, one that straddles from or to its measurements one
// by one; a missing value field is an error), and counts a bucket the
// server returned twice once.
//
// Where the server has the $group accumulators $min and $max
// ([patterns.FeatureGroupMinMaxAvg]: MongoDB, FerretDB 2.x), it sends one
// aggregate, plus getMores beyond 101 series: the server computes every
// summary, from one row per bucket (no $unwind of the measurements).
// Elsewhere (FerretDB 1.x) it computes in the client from one find of
// the buckets, measurements and all, sorted by meta and window start
// (plus getMores); memory holds the buckets of one window of one series,
// and a series is yielded once its buckets are all counted. Both paths
// filter on the window start first (the index {start: 1}); the client
// path sorts by {<meta>, start}, which the index {<meta>, start, count}
// serves. Writes during the iteration may or may not be counted, as with
// [Buckets.Range].
//
// Metas are one series when the server compares them equal, as for Add,
// Latest and Summaries: numbers by value whatever their BSON type (int32
// 7, int64 7, 7.0 and the decimal 7.00; -0 and 0; the NaNs), inside
// embedded documents too, and exactly (the int64 2^53+1 is not the double
// 2^53). Such a series, stored under metas of several types (a meta field
// that changed from an int to a float64 between releases), is yielded
// once, with the meta of one of its buckets: on the server path the one
// its $group meets first, on the client path the one of its first bucket
// in window order.
//
// A zero from or to, or to before from, yield one [patterns.ErrInvalid]
// error; from == to yields nothing and sends nothing. from and to count
// in whole milliseconds, as BSON dates do. A meta that does not decode
// into M yields an error. A bucket stored without the repository whose
// meta is an array (Add refuses one) is its own series on the server
// path; the client path, whose sort by meta places an array by its least
// element, yields an error wrapping [patterns.ErrInvalid] that names the
// bucket when it meets one.
func (b *Buckets[M, V]) SummariesBySeries(ctx context.Context, from, to time.Time) iter.Seq2[SeriesSummary[M], error] {
	const op = "SummariesBySeries"
	return windowSeq(ctx, b, op, from, to, func(r read) iter.Seq2[SeriesSummary[M], error] {
		g, filter := wholeGrid(r), b.s.windowOverlap(r)
		return func(yield func(SeriesSummary[M], error) bool) {
			ctx, o := b.start(ctx, op)
			out, errp := observe(o, yield)
			defer o.Finish(errp)
			p, err := b.ready(ctx)
			switch {
			case err != nil:
				out(SeriesSummary[M]{}, failed(op, err))
			case p.serverSummaries:
				yieldRows(ctx, op, b.s.coll, b.s.seriesPipeline(filter, g), seriesRow[M](g, b.s.valueFields), out)
			default:
				open := func(ctx context.Context) (*mongo.Cursor, error) {
					return b.s.coll.Find(ctx, filter, options.Find().SetSort(b.s.byMetaThenStart()).SetProjection(withoutWrites()))
				}
				b.clientSummaries(ctx, op, open, g, true, func(m bson.RawValue, s Summary, err error) bool {
					if err != nil {
						return out(SeriesSummary[M]{}, err)
					}
					ss := SeriesSummary[M]{Summary: s}
					if err := m.Unmarshal(&ss.Meta); err != nil {
						return out(SeriesSummary[M]{}, failed(op, fmt.Errorf("decode a meta: %w", err)))
					}
					return out(ss, nil)
				})
			}
		}
	})
}

// clientSummaries computes Summaries (bySeries false: the buckets of one
// series, sorted by start) or SummariesBySeries (bySeries true: the
// buckets of every series, sorted by meta, then start) without $min and
// $max accumulators, reading the buckets, measurements and all, that
// open finds; it yields each summary with its series' meta (the zero
// value when not bySeries).
func (b *Buckets[M, V]) clientSummaries(ctx context.Context, op string, open func(context.Context) (*mongo.Cursor, error), g grid, bySeries bool, yield func(bson.RawValue, Summary, error) bool) {
	acc := newAccumulator(g, b.s.valueFields)
	fail := func(err error) { yield(bson.RawValue{}, Summary{}, failed(op, err)) }
	// The buckets of one window of one series are held until the next
	// window starts, so that a bucket the find returned twice counts once
	// (see [latest]).
	var window []summaryBucket
	var series string // the series of window
	add := func() error {
		for _, bk := range latest(window, func(b *summaryBucket) bson.ObjectID { return b.ID }, func(b *summaryBucket) int { return int(b.Count) }) {
			if g.within(bk.First, bk.Last) {
				if err := acc.addBucket(series, bk); err != nil {
					return err
				}
				continue
			}
			points, ok := bk.Points.ArrayOK()
			if !ok {
				return fmt.Errorf("bucket %s: its measurements are a BSON %s, not an array", bk.ID.Hex(), bk.Points.Type)
			}
			values, err := points.Values()
			if err != nil {
				return fmt.Errorf("bucket %s: %w", bk.ID.Hex(), err)
			}
			for _, v := range values {
				raw, ok := v.DocumentOK()
				if !ok {
					return fmt.Errorf("bucket %s: a measurement is a BSON %s, not a document", bk.ID.Hex(), v.Type)
				}
				if err := acc.addPoint(b.s, series, raw); err != nil {
					return fmt.Errorf("bucket %s: %w", bk.ID.Hex(), err)
				}
			}
		}
		window = window[:0]
		return nil
	}
	for raw, err := range seq.Cursor[bson.Raw](ctx, open) {
		var bk summaryBucket
		if err == nil {
			err = bson.Unmarshal(raw, &bk)
		}
		if err != nil {
			fail(err)
			return
		}
		var m bson.RawValue
		if bySeries {
			m = raw.Lookup(b.s.metaField)
			if m.Type == bson.TypeArray {
				// Stored without the repository (Add refuses it): the sort
				// by meta places an array by its least element, among the
				// buckets of another series.
				fail(errs.Invalid("bucket %s: its meta is an array, which the sort by meta cannot place", bk.ID.Hex()))
				return
			}
		}
		key := acc.series(m)
		if len(window) > 0 && (bk.Start != window[0].Start || key != series) {
			if err := add(); err != nil {
				fail(err)
				return
			}
			// Later buckets are of this series and start at bk.Start or
			// after, or of a later series: no measurement of theirs falls
			// in a step of an earlier series, or in a step of this one
			// that ends by then.
			if !acc.emit(key, bk.Start, yield) {
				return
			}
		}
		series = key
		window = append(window, bk)
	}
	if err := add(); err != nil {
		fail(err)
		return
	}
	acc.emit("", math.MinInt64, yield)
}

// summaryBucket is what the client path reads of a bucket.
type summaryBucket struct {
	ID      bson.ObjectID `bson:"_id"`
	Start   bson.DateTime `bson:"start"`
	First   bson.DateTime `bson:"first"`
	Last    bson.DateTime `bson:"last"`
	Count   int64         `bson:"count"`
	Summary bson.Raw      `bson:"summary"`
	Points  bson.RawValue `bson:"measurements"`
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

// wholeGrid is the one step [from, to) of SummariesBySeries (to > from).
func wholeGrid(r read) grid {
	return grid{from: r.from, to: r.to, step: int64(r.to - r.from)}
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

// yieldRows runs a summary pipeline and yields its groups as row makes
// them: each of the rows of one key ({_id: {k: key, ...}}, adjacent, as
// the pipeline sorts them by _id; keys equal as the server compares
// them) makes one. It reads the rows raw, into
// buffers it reuses, and counts its commands in the operation of ctx.
func yieldRows[T any](ctx context.Context, op string, coll *mongo.Collection, pipeline mongo.Pipeline, row func(key bson.RawValue, parts []bson.Raw) (T, error), yield func(T, error) bool) {
	var zero T
	fail := func(err error) { yield(zero, failed(op, err)) }
	o := patterns.OperationFrom(ctx)
	o.Sent(1)
	cur, err := coll.Aggregate(ctx, pipeline)
	if err != nil {
		fail(err)
		return
	}
	defer obs.Close(context.WithoutCancel(ctx), o, cur)
	var bufs [][]byte // the rows of the key being read, then spare
	parts := 0
	emit := func() bool {
		rows := make([]bson.Raw, parts)
		for i := range rows {
			rows[i] = bufs[i]
		}
		key := rows[0].Lookup("_id", "k")
		v, err := row(key, rows)
		if err != nil {
			fail(err)
			return false
		}
		parts = 0
		return yield(v, nil)
	}
	for obs.Next(ctx, o, cur) {
		k, err := cur.Current.LookupErr("_id", "k")
		if err != nil {
			fail(fmt.Errorf("summary row without a key: %s", cur.Current))
			return
		}
		if parts > 0 && !bsonid.Equal(k, bson.Raw(bufs[0]).Lookup("_id", "k")) && !emit() {
			return
		}
		if parts == len(bufs) {
			bufs = append(bufs, nil)
		}
		bufs[parts] = append(bufs[parts][:0], cur.Current...)
		parts++
	}
	if err := cur.Err(); err != nil {
		fail(err)
		return
	}
	if parts > 0 {
		emit()
	}
}

// stepRow reads the rows of one step of a summary pipeline grouped by
// step.
func (g grid) stepRow(fields []string) func(bson.RawValue, []bson.Raw) (Summary, error) {
	return func(key bson.RawValue, parts []bson.Raw) (Summary, error) {
		start, ok := key.DateTimeOK()
		if !ok {
			return Summary{}, fmt.Errorf("summary row without a step start: %s", parts[0])
		}
		t, err := tallyOf(parts, fields, bson.DateTime(start))
		if err != nil {
			return Summary{}, err
		}
		return g.summary(bson.DateTime(start), fields, t), nil
	}
}

// seriesRow reads the rows of one series of a summary pipeline grouped by
// series.
func seriesRow[M any](g grid, fields []string) func(bson.RawValue, []bson.Raw) (SeriesSummary[M], error) {
	return func(key bson.RawValue, parts []bson.Raw) (SeriesSummary[M], error) {
		var out SeriesSummary[M]
		if err := key.Unmarshal(&out.Meta); err != nil {
			return out, fmt.Errorf("decode a meta: %w", err)
		}
		t, err := tallyOf(parts, fields, g.from)
		if err != nil {
			return out, err
		}
		out.Summary = g.summary(g.from, fields, t)
		return out, nil
	}
}

// tallyOf adds up the counts and stats of the grouped rows of one key of
// a summary pipeline, whose step starts at step: per value field, the sum
// of their sums and the min and max of their mins and maxes, of
// measurements (p), of bucket summaries (s) or of both (no prefix),
// whichever each row has.
func tallyOf(parts []bson.Raw, fields []string, step bson.DateTime) (*tally, error) {
	t := &tally{stats: make([]Stats, len(fields))}
	for i := range t.stats {
		t.stats[i].Min, t.stats[i].Max = math.Inf(1), math.Inf(-1)
	}
	for _, row := range parts {
		count, ok := number(row.Lookup("count"))
		if !ok {
			return nil, fmt.Errorf("summary row without a count: %s", row)
		}
		t.count += int64(count)
		for i, f := range fields {
			n, _ := number(row.Lookup(column("n", i)))
			if n != count {
				return nil, missingValue(f, step)
			}
			st := &t.stats[i]
			ok := false
			for _, part := range []string{"p", "s", ""} {
				sum, okSum := number(row.Lookup(column(part+"sum", i)))
				lo, okMin := number(row.Lookup(column(part+"min", i)))
				hi, okMax := number(row.Lookup(column(part+"max", i)))
				if okSum && okMin && okMax {
					st.Sum, st.Min, st.Max, ok = st.Sum+sum, min(st.Min, lo), max(st.Max, hi), true
				}
			}
			if !ok {
				return nil, errs.Invalid("summary row without the sum, min or max of %q: %s", f, row)
			}
		}
	}
	return t, nil
}

func missingValue(field string, step bson.DateTime) error {
	return errs.Invalid("some measurements of the step at %s have no value %q (was it added to ValueFields after they were written?)", step.Time().UTC().Format(time.RFC3339Nano), field)
}

// tally is the running summary of one step.
type tally struct {
	count int64
	stats []Stats // per value field; Mean is filled in at the end
}

// accumulator sums buckets and measurements into steps of series for
// the client path, and yields the steps that are complete.
type accumulator struct {
	grid
	fields []string
	open   map[slot]*tally
	order  []string                 // the series read and not yet emitted, in the order read
	metas  map[string]bson.RawValue // of the series in order, by key
}

// slot is one step of one series.
type slot struct {
	series string // see [accumulator.series]
	start  bson.DateTime
}

func newAccumulator(g grid, fields []string) *accumulator {
	return &accumulator{grid: g, fields: fields, open: map[slot]*tally{}, metas: map[string]bson.RawValue{}}
}

// series returns the key of the series of meta m (the zero value for the
// one series of Summaries), which the buckets read in order name, and
// remembers it in order: the order in which emit yields the series. The
// key is [bsonid.Key]: metas the server compares equal (int32 7, int64 7,
// 7.0 and the decimal 7.00, alone or inside a document; -0 and 0; the
// NaNs) are one series, as they are to Add's upsert and to the server
// path's $group, and the sort by meta puts their buckets together; metas
// that differ, however little (the int64 2^53+1 and the double 2^53), are
// two. The series is yielded with the meta of its first bucket read.
func (a *accumulator) series(m bson.RawValue) string {
	key := bsonid.Key(m)
	if n := len(a.order); n == 0 || a.order[n-1] != key {
		a.order = append(a.order, key)
		a.metas[key] = m
	}
	return key
}

func (a *accumulator) add(series string, at bson.DateTime, count int64, mins, maxs, sums []float64) {
	k := slot{series, a.stepOf(at)}
	t := a.open[k]
	if t == nil {
		t = &tally{stats: make([]Stats, len(a.fields))}
		for i := range t.stats {
			t.stats[i].Min, t.stats[i].Max = math.Inf(1), math.Inf(-1)
		}
		a.open[k] = t
	}
	t.count += count
	for i := range t.stats {
		st := &t.stats[i]
		st.Min, st.Max, st.Sum = min(st.Min, mins[i]), max(st.Max, maxs[i]), st.Sum+sums[i]
	}
}

// addBucket adds a bucket's stored summary; the bucket lies in one step.
func (a *accumulator) addBucket(series string, bk summaryBucket) error {
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
	a.add(series, bk.First, bk.Count, mins, maxs, sums)
	return nil
}

// addPoint adds one measurement, if it lies in [from, to).
func (a *accumulator) addPoint(s *settings, series string, raw bson.Raw) error {
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
	a.add(series, at, 1, vals, vals, vals)
	return nil
}

// emit yields, in order, the steps of the series before current, and
// those of current that end by before, and forgets them (current stays in
// order, for the steps its later buckets open); it reports whether to go
// on. emit("", math.MinInt64, yield) yields every step.
func (a *accumulator) emit(current string, before bson.DateTime, yield func(bson.RawValue, Summary, error) bool) bool {
	for len(a.order) > 0 {
		series := a.order[0]
		var starts []bson.DateTime
		for k := range a.open {
			if k.series == series {
				starts = append(starts, k.start)
			}
		}
		slices.Sort(starts)
		for _, start := range starts {
			if series == current && int64(start)+a.step > int64(before) {
				return true
			}
			k := slot{series, start}
			t := a.open[k]
			delete(a.open, k)
			if !yield(a.metas[series], a.summary(start, a.fields, t), nil) {
				return false
			}
		}
		if series == current {
			return true // its later buckets add to it
		}
		a.order = a.order[1:]
		delete(a.metas, series)
	}
	return true
}
