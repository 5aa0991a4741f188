package bucket

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The server's error codes for creating a collection that exists, and an
// index whose keys an index of another name (or options) has already.
const (
	codeNamespaceNotFound     = 26
	codeNamespaceExists       = 48
	codeIndexOptionsConflict  = 85
	codeIndexKeySpecsConflict = 86
)

// recheckCollection is how long a TimeSeries trusts that its collection
// is the time-series collection it created or checked (see
// [NewTimeSeries]).
const recheckCollection = time.Minute

// maxMeasurementSize is the largest measurement document a time-series
// collection takes: 4 MiB (MongoDB's time-series limitations).
const maxMeasurementSize = 4 << 20

// TimeSeries stores measurements in a native time-series collection
// (MongoDB 5.0+): one document per measurement, {<meta>: M, ...V}, which
// the server groups into compressed buckets of its own. It is the other
// backend of [Store], so that an application can choose between it and
// [Buckets], or compare them, with the same Config.
//
// On a server without time-series collections ([patterns.FeatureTimeSeries]:
// MongoDB before 5.0, FerretDB, whose 2.x would silently create a plain
// collection) every method returns an [*patterns.UnsupportedError] naming
// the feature, and creates nothing. It is safe for concurrent use.
type TimeSeries[M, V any] struct {
	s       *settings
	key     bson.D // the index key of s.timeSeriesKey
	planned lazy.Value[decided]
	created lazy.Value[time.Time] // when the collection was last created or checked
}

var _ Store[string, struct{}] = (*TimeSeries[string, struct{}])(nil)

// NewTimeSeries returns a time-series store on the collection
// cfg.Collection of db. It validates cfg as [New] does, except that Window
// and Cap are optional: with Granularity empty, a Window must be a whole
// number of seconds up to one year (it becomes bucketMaxSpanSeconds and
// bucketRoundingSeconds); Cap is ignored. A V whose zero value holds the
// meta field is rejected: the meta goes beside the measurement's fields.
//
// NewTimeSeries sends nothing. The first method call with a context
// detects the server (cached per client) and creates the collection with
// one create command: {timeField, metaField, granularity or the bucket
// span}, and expireAfterSeconds when Config.TTL is set; before MongoDB
// 6.3, which creates it with the collection, one createIndexes adds the
// index {<meta>: 1, <time>: 1} (the collection is empty: the build is
// instant). If the collection exists, one listCollections checks that it
// is a time-series collection with the same time and meta fields, and the
// store uses it as it is (its granularity and expiry untouched), with one
// createIndexes of that index, whatever the server's version: MongoDB
// 6.3+ builds it only for a collection it creates, so a collection made
// another way (by other tooling, on 6.2, or with the index dropped) lacks
// it, and Range, Summaries and DeleteSeriesBefore would scan; where the
// index exists, the command changes nothing.
//
// MongoDB creates a missing collection on the first insert into it, as a
// plain collection: a time-series collection dropped while the
// application runs would come back without compression or expiry,
// silently. So the store trusts its check for a minute at most, and
// forgets it at once when a command finds the collection missing
// (NamespaceNotFound): the next method call creates the collection again,
// or checks it (the three commands above), and a plain collection that
// took its place meanwhile is then refused with [patterns.ErrInvalid]
// rather than written to.
func NewTimeSeries[M, V any](db *mongo.Database, cfg Config) (*TimeSeries[M, V], error) {
	ts, err := newTimeSeries[M, V](db, cfg)
	return ts, pkg.Wrap("New", err)
}

func newTimeSeries[M, V any](db *mongo.Database, cfg Config) (*TimeSeries[M, V], error) {
	s, err := newSettings(db, cfg)
	if err != nil {
		return nil, err
	}
	if s.granularity == "" && s.window > 0 {
		if cfg.Window%time.Second != 0 || cfg.Window > maxBucketSpan {
			return nil, errs.Invalid("Window %v is not a whole number of seconds up to %v, as a time-series bucket span must be", cfg.Window, maxBucketSpan)
		}
	}
	zero, err := zeroDocument[V](s)
	if err != nil {
		return nil, err
	}
	if _, err := zero.LookupErr(s.metaField); err == nil {
		return nil, errs.Invalid("measurement type %T has a field %q, the meta field", *new(V), s.metaField)
	}
	key, err := s.timeSeriesKey()
	if err != nil {
		return nil, err
	}
	return &TimeSeries[M, V]{s: s, key: key}, nil
}

// Indexes returns the index {<meta>: 1, <time>: 1} that Range, Summaries
// and DeleteSeriesBefore use. The store creates it on first use, with the
// collection or on the existing one (see [NewTimeSeries]), so that
// [patterns.EnsureIndexes] is needed only to repair a collection whose
// index was dropped while the application runs. It sends nothing. Call
// EnsureIndexes of it only on an existing collection: createIndexes on a
// missing one makes a plain collection, which the store then refuses.
func (ts *TimeSeries[M, V]) Indexes() []patterns.Index {
	return []patterns.Index{{Collection: ts.s.coll, Model: mongo.IndexModel{Keys: ts.key}}}
}

// ready returns the store's plan, deciding it on first use, refuses what
// the server cannot serve, and creates or checks the collection once.
func (ts *TimeSeries[M, V]) ready(ctx context.Context) (decided, error) {
	d, err := decide(ctx, &ts.planned, ts.s.coll.Database().Client(), true)
	if err != nil {
		return d, err
	}
	if err := d.require(d.plan.timeSeries, patterns.FeatureTimeSeries); err != nil {
		return d, err
	}
	if ts.s.granularity == "" && ts.s.window > 0 {
		if err := d.require(d.plan.timeSeriesBucketing, patterns.FeatureTimeSeriesCustomBucketing); err != nil {
			return d, err
		}
	}
	if err := d.checkTTL(ts.s); err != nil {
		return d, err
	}
	create := func(ctx context.Context) (time.Time, error) { return time.Now(), ts.create(ctx, d.plan) }
	at, err := ts.created.Get(ctx, create)
	if err == nil && time.Since(at) > recheckCollection {
		ts.created.Forget()
		_, err = ts.created.Get(ctx, create)
	}
	return d, err
}

// start starts the operation name of the store for Config.Hook (see
// [obs.Start]).
func (ts *TimeSeries[M, V]) start(ctx context.Context, name string) (context.Context, *patterns.Operation) {
	return obs.Start(ctx, ts.s.hook, &ts.planned, string(pkg), name, ts.s.coll.Database().Name(), ts.s.collections)
}

func (ts *TimeSeries[M, V]) observed() bool { return ts.s.hook != nil }

// distrust forgets that the collection was created when err says that
// it is missing, and returns err.
func (ts *TimeSeries[M, V]) distrust(err error) error {
	se, isServer := errors.AsType[mongo.ServerError](err)
	we, isWrite := errors.AsType[mongo.WriteError](err)
	if isServer && se.HasErrorCode(codeNamespaceNotFound) || isWrite && we.Code == codeNamespaceNotFound {
		ts.created.Forget()
	}
	return err
}

// indexAfterCreate reports whether create sends the createIndexes of the
// index {<meta>: 1, <time>: 1}: always on a collection that existed
// (MongoDB 6.3+ builds it only for a collection it creates), and on a new
// one before MongoDB 6.3 (p without custom bucketing, new in 6.3).
func indexAfterCreate(p plan, existed bool) bool { return existed || !p.timeSeriesBucketing }

// create creates the collection, or checks the existing one.
func (ts *TimeSeries[M, V]) create(ctx context.Context, p plan) error {
	db := ts.s.coll.Database()
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	err := db.RunCommand(ctx, ts.s.createCommand()).Err()
	existed := false
	if ce, ok := errors.AsType[mongo.CommandError](err); ok && ce.Code == codeNamespaceExists {
		existed, err = true, ts.checkExisting(ctx)
	}
	if err == nil && indexAfterCreate(p, existed) {
		op.Sent(1)
		_, err = ts.s.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ts.key})
		if ce, ok := errors.AsType[mongo.CommandError](err); ok && (ce.Code == codeIndexOptionsConflict || ce.Code == codeIndexKeySpecsConflict) {
			err = nil // an index of these keys exists, by another name
		}
	}
	if err != nil {
		return fmt.Errorf("create time-series collection %s: %w", ts.s.coll.Name(), srverr.Classify(err))
	}
	return nil
}

// checkExisting checks that the existing collection is a time-series
// collection with the configured time and meta fields.
func (ts *TimeSeries[M, V]) checkExisting(ctx context.Context) error {
	patterns.OperationFrom(ctx).Sent(1)
	specs, err := ts.s.coll.Database().ListCollectionSpecifications(ctx, byName(ts.s.coll.Name()))
	if err != nil {
		return err
	}
	if len(specs) != 1 {
		return fmt.Errorf("the collection exists but listCollections does not list it")
	}
	var o struct {
		TimeSeries *struct {
			TimeField string `bson:"timeField"`
			MetaField string `bson:"metaField"`
		} `bson:"timeseries"`
	}
	if err := bson.Unmarshal(specs[0].Options, &o); err != nil {
		return err
	}
	switch {
	case o.TimeSeries == nil:
		return errs.Invalid("collection %s exists and is not a time-series collection", ts.s.coll.Name())
	case o.TimeSeries.TimeField != ts.s.timeField || o.TimeSeries.MetaField != ts.s.metaField:
		return errs.Invalid("collection %s has timeField %q and metaField %q, not %q and %q",
			ts.s.coll.Name(), o.TimeSeries.TimeField, o.TimeSeries.MetaField, ts.s.timeField, ts.s.metaField)
	}
	return nil
}

// document validates a measurement and builds its document: the meta, then
// the measurement's fields.
func (ts *TimeSeries[M, V]) document(meta M, v V) (bson.D, error) {
	m, err := metaValue(meta)
	if err != nil {
		return nil, err
	}
	p, err := ts.s.parse(v)
	if err != nil {
		return nil, err
	}
	elems, err := p.raw.Elements()
	if err != nil {
		return nil, err
	}
	if size := len(p.raw) + len(ts.s.metaField) + 2 + len(m.Value); size > maxMeasurementSize {
		return nil, errs.TooLarge("a measurement document of %d bytes, more than the %d a time-series collection takes", size, maxMeasurementSize)
	}
	doc := make(bson.D, 0, len(elems)+1)
	doc = append(doc, bson.E{Key: ts.s.metaField, Value: m})
	for _, e := range elems {
		if e.Key() == ts.s.metaField {
			return nil, errs.Invalid("measurement has a field %q, the meta field", ts.s.metaField)
		}
		doc = append(doc, bson.E{Key: e.Key(), Value: e.Value()})
	}
	return doc, nil
}

// Add inserts one measurement document: one insert, one round trip (and,
// on the store's first use, the create of [NewTimeSeries]). Bad input is
// rejected as by [Buckets.Add], with nothing written; a measurement
// document past 4 MiB, which a time-series collection refuses, returns
// [patterns.ErrTooLarge]. An insert the
// server aborted applied nothing and is sent again (see [srverr.Retry]);
// like any insert with a driver-generated _id, a retry after an unknown
// outcome (yours, or the driver's) may store it twice.
func (ts *TimeSeries[M, V]) Add(ctx context.Context, meta M, v V) (err error) {
	ctx, op := ts.start(ctx, "Add")
	defer op.Finish(&err)
	return pkg.Wrap("Add", ts.add(ctx, meta, v))
}

func (ts *TimeSeries[M, V]) add(ctx context.Context, meta M, v V) error {
	if _, err := ts.ready(ctx); err != nil {
		return err
	}
	doc, err := ts.document(meta, v)
	if err != nil {
		return err
	}
	op := patterns.OperationFrom(ctx)
	return srverr.Classify(ts.distrust(srverr.Retry(ctx, func() error {
		op.Sent(1)
		_, err := ts.s.coll.InsertOne(ctx, doc)
		if err == nil {
			op.Affected(1)
		}
		return err
	})))
}

// AddMany inserts many measurements in one unordered insert command (the
// driver splits beyond 100,000 documents or 48 MB). All are validated
// first: a bad one returns [patterns.ErrInvalid] (a document past the
// 4 MiB a time-series collection takes, [patterns.ErrTooLarge]) naming its
// index, and nothing is written. If the server refuses some (a document
// validator of yours, say: sending them again would not help, so AddMany
// does not), it returns a [*PartialError] listing them; the others are
// stored once. An
// error that leaves unknown which were inserted (a network error the
// driver could not retry, a timeout) is returned as it is. A concurrent
// reader may see some measurements of the batch and not yet the others.
func (ts *TimeSeries[M, V]) AddMany(ctx context.Context, points []Point[M, V]) (err error) {
	ctx, op := ts.start(ctx, "AddMany")
	defer op.Finish(&err)
	return pkg.Wrap("AddMany", ts.addMany(ctx, points))
}

func (ts *TimeSeries[M, V]) addMany(ctx context.Context, points []Point[M, V]) error {
	if _, err := ts.ready(ctx); err != nil {
		return err
	}
	models := make([]mongo.WriteModel, len(points))
	for i, pt := range points {
		doc, err := ts.document(pt.Meta, pt.Value)
		if err != nil {
			return fmt.Errorf("point %d: %w", i, err)
		}
		models[i] = mongo.NewInsertOneModel().SetDocument(doc)
	}
	return ts.distrust(ts.s.insertAll(ctx, models))
}

// Range yields the measurements of the series meta with from <= time < to,
// in time order (measurements with equal times in no fixed order): one
// find sorted on the time field, plus a getMore per batch, served by the
// index {<meta>: 1, <time>: 1}. Each measurement is one document, read
// whole; the find reads no snapshot across its batches, so a measurement
// inserted or deleted during the iteration may or may not be seen.
// Argument errors are those of [Buckets.Range].
func (ts *TimeSeries[M, V]) Range(ctx context.Context, meta M, from, to time.Time) iter.Seq2[V, error] {
	return readSeq(ctx, ts, "Range", meta, from, to, nil, func(r read) iter.Seq2[V, error] {
		open := func(ctx context.Context) (*mongo.Cursor, error) {
			return ts.s.coll.Find(ctx, ts.s.intervalFilter(r), options.Find().SetSort(ts.s.byTime()))
		}
		return func(yield func(V, error) bool) {
			ctx, op := ts.start(ctx, "Range")
			out, errp := observe(op, yield)
			defer op.Finish(errp)
			if _, err := ts.ready(ctx); err != nil {
				var zero V
				out(zero, failed("Range", err))
				return
			}
			for v, err := range seq.Cursor[V](ctx, open) {
				if err != nil {
					err = failed("Range", err)
				}
				if !out(v, err) {
					return
				}
			}
		}
	})
}

// Summaries is [Buckets.Summaries] on the time-series collection: one
// aggregate ($match on the series and interval, $group by step with $sum,
// $min and $max, $sort), plus getMores beyond 101 steps. The server
// unpacks the measurements of the buckets it reads: it answers from the
// control summaries of its buckets (their min and max) only where a
// query asks for no more than those, which a grouping by step does not. It
// reads no snapshot:
// measurements inserted or deleted while it runs may or may not be
// counted.
func (ts *TimeSeries[M, V]) Summaries(ctx context.Context, meta M, from, to time.Time, step time.Duration) iter.Seq2[Summary, error] {
	return readSeq(ctx, ts, "Summaries", meta, from, to, checkStep(step), func(r read) iter.Seq2[Summary, error] {
		g := newGrid(r, step)
		return func(yield func(Summary, error) bool) {
			ctx, op := ts.start(ctx, "Summaries")
			out, errp := observe(op, yield)
			defer op.Finish(errp)
			if _, err := ts.ready(ctx); err != nil {
				out(Summary{}, failed("Summaries", err))
				return
			}
			yieldRows(ctx, "Summaries", ts.s.coll, ts.s.timeSeriesPipeline(ts.s.intervalFilter(r), g), g.stepRow(ts.s.valueFields), out)
		}
	})
}

// SummariesBySeries is [Buckets.SummariesBySeries] on the time-series
// collection: one aggregate ($match on the interval, $group by meta with
// $sum, $min and $max, $sort), plus getMores beyond 101 series. The
// $match names the time only, which MongoDB answers from the bounds of
// its internal buckets (control.min and control.max of the time, which it
// indexes with the collection's clustered key); the index {<meta>: 1,
// <time>: 1} does not lead with it. It reads no snapshot: measurements
// inserted or deleted while it runs may or may not be counted. On a
// server without time-series collections it yields an
// [*patterns.UnsupportedError], as every method does.
func (ts *TimeSeries[M, V]) SummariesBySeries(ctx context.Context, from, to time.Time) iter.Seq2[SeriesSummary[M], error] {
	const op = "SummariesBySeries"
	return windowSeq(ctx, ts, op, from, to, func(r read) iter.Seq2[SeriesSummary[M], error] {
		g := wholeGrid(r)
		return func(yield func(SeriesSummary[M], error) bool) {
			ctx, o := ts.start(ctx, op)
			out, errp := observe(o, yield)
			defer o.Finish(errp)
			if _, err := ts.ready(ctx); err != nil {
				out(SeriesSummary[M]{}, failed(op, err))
				return
			}
			yieldRows(ctx, op, ts.s.coll, ts.s.timeSeriesSeriesPipeline(ts.s.timeFilter(r)), seriesRow[M](g, ts.s.valueFields), out)
		}
	})
}

// DeleteBefore deletes the measurements of every series before t, exactly
// (not by bucket), with one deleteMany: {<time>: {$lt: t}}. It needs
// MongoDB 7.0+ ([patterns.FeatureTimeSeriesDeletes]); earlier servers delete from
// time-series collections by meta only, and get an
// [*patterns.UnsupportedError]. A concurrent reader may see some of the
// old measurements gone and others not yet. A zero t returns
// [patterns.ErrInvalid].
func (ts *TimeSeries[M, V]) DeleteBefore(ctx context.Context, t time.Time) (err error) {
	ctx, op := ts.start(ctx, "DeleteBefore")
	defer op.Finish(&err)
	return pkg.Wrap("DeleteBefore", ts.s.deleteBefore(ctx, nil, true, t, ts.canDelete, ts.s.beforeFilter))
}

// DeleteSeriesBefore is [TimeSeries.DeleteBefore] for the series meta only.
func (ts *TimeSeries[M, V]) DeleteSeriesBefore(ctx context.Context, meta M, t time.Time) (err error) {
	ctx, op := ts.start(ctx, "DeleteSeriesBefore")
	defer op.Finish(&err)
	return pkg.Wrap("DeleteSeriesBefore", ts.s.deleteBefore(ctx, meta, false, t, ts.canDelete, ts.s.beforeFilter))
}

// canDelete refuses deletes by time where the server cannot do them.
func (ts *TimeSeries[M, V]) canDelete(ctx context.Context) error {
	d, err := ts.ready(ctx)
	if err != nil {
		return err
	}
	return d.require(d.plan.timeSeriesDeletes, patterns.FeatureTimeSeriesDeletes)
}

// insertAll inserts the documents of models in one unordered insert
// command (the driver splits beyond 100,000 documents or 48 MB), sending
// again those that the server aborted (see [srverr.Retry]). The documents
// have new ids, so a duplicate key can only come from a unique index of
// the user's, which sending them again cannot satisfy: the documents the
// server refuses are reported in a [*PartialError], at once.
func (s *settings) insertAll(ctx context.Context, models []mongo.WriteModel) error {
	results, err := s.write(ctx, models, 0)
	if err != nil {
		return err
	}
	var failed []int
	var first error
	for i, err := range results {
		if err != nil {
			failed = append(failed, i)
			if first == nil {
				first = srverr.Classify(err)
			}
		}
	}
	if len(failed) > 0 {
		return &PartialError{Failed: failed, Err: first}
	}
	return nil
}
