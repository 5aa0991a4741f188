package bucket

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// latestHeads is how many buckets the first read of Latest takes, newest
// window first: two tell whether the newest window holds one bucket.
const latestHeads = 2

// Latest returns the newest measurement of the series meta: the one with
// the greatest time (of several with that time, the last added to its
// bucket), wherever it arrived from (a late measurement of an older window
// is not the newest).
//
// It sends one find on the index {<meta>, start, count}, sorted by window
// start, newest first, limited to two buckets, which it reads whole: the
// newest window's bucket and one of the window before, which tells that
// the newest window holds no other. When both are of the newest window (it
// holds several buckets: full ones, or partial ones of concurrent
// writers), a second find reads every bucket of that window. The same
// commands on every server.
//
// A concurrent writer may add a newer measurement while Latest runs: it is
// seen or not, each bucket read as one consistent document. A series
// with no measurement returns [patterns.ErrNotFound]; a bad meta,
// [patterns.ErrInvalid], with nothing sent.
func (b *Buckets[M, V]) Latest(ctx context.Context, meta M) (_ V, err error) {
	ctx, op := b.start(ctx, "Latest")
	defer op.Finish(&err)
	v, err := b.latest(ctx, meta)
	return v, pkg.Wrap("Latest", err)
}

func (b *Buckets[M, V]) latest(ctx context.Context, meta M) (V, error) {
	var zero V
	m, err := metaValue(meta)
	if err != nil {
		return zero, err
	}
	if _, err := b.ready(ctx); err != nil {
		return zero, err
	}
	heads, err := b.s.readBuckets(ctx, b.s.seriesFilter(m), options.Find().SetSort(newestFirst()).SetLimit(latestHeads).SetProjection(rangeProjection()))
	if err != nil {
		return zero, srverr.Classify(err)
	}
	if len(heads) == 0 {
		return zero, notFound(m)
	}
	window := heads
	if len(heads) == latestHeads && heads[1].Start == heads[0].Start {
		if window, err = b.s.readBuckets(ctx, b.s.windowFilter(m, heads[0].Start), options.Find().SetProjection(rangeProjection())); err != nil {
			return zero, srverr.Classify(err)
		}
	} else {
		window = heads[:1]
	}
	raw, err := newest(b.s.timeField, window)
	if err != nil {
		return zero, err
	}
	if raw == nil {
		return zero, notFound(m)
	}
	var v V
	if err := bson.Unmarshal(raw, &v); err != nil {
		return zero, fmt.Errorf("decode a measurement: %w", err)
	}
	return v, nil
}

// notFound is the error of a series without measurements.
func notFound(m bson.RawValue) error {
	return fmt.Errorf("series %s: no measurement: %w", bsonid.Text(m), patterns.ErrNotFound)
}

// readBuckets reads the buckets that filter selects, as find options o
// say.
func (s *settings) readBuckets(ctx context.Context, filter bson.D, o *options.FindOptionsBuilder) ([]rangeBucket, error) {
	var out []rangeBucket
	open := func(ctx context.Context) (*mongo.Cursor, error) { return s.coll.Find(ctx, filter, o) }
	for bk, err := range seq.Cursor[rangeBucket](ctx, open) {
		if err != nil {
			return nil, err
		}
		out = append(out, bk)
	}
	return out, nil
}

// newest returns the measurement with the greatest time of the buckets of
// one window (of equal times, the last in the last bucket by id), nil
// when they hold none.
func newest(timeField string, window []rangeBucket) (bson.Raw, error) {
	var best bson.Raw
	var bestAt bson.DateTime
	for _, bk := range latest(window, func(b *rangeBucket) bson.ObjectID { return b.ID }, func(b *rangeBucket) int { return len(b.Points) }) {
		for _, raw := range bk.Points {
			at, err := timeOf(raw, timeField)
			if err != nil {
				return nil, fmt.Errorf("bucket %s: %w", bk.ID.Hex(), err)
			}
			if best == nil || at >= bestAt {
				best, bestAt = raw, at
			}
		}
	}
	return best, nil
}

// Latest returns the newest measurement of the series meta: one find
// {<meta>: M} sorted by time, newest first, limit 1, served backwards by
// the index {<meta>: 1, <time>: 1}: one round trip (and, on the store's
// first use, the create of [NewTimeSeries]). Of measurements with equal
// times, which one is not fixed. A series with no measurement returns
// [patterns.ErrNotFound]; a bad meta, [patterns.ErrInvalid], with nothing
// sent. On a server without time-series collections it returns an
// [*patterns.UnsupportedError], as every method does.
func (ts *TimeSeries[M, V]) Latest(ctx context.Context, meta M) (_ V, err error) {
	ctx, op := ts.start(ctx, "Latest")
	defer op.Finish(&err)
	v, err := ts.latest(ctx, meta)
	return v, pkg.Wrap("Latest", err)
}

func (ts *TimeSeries[M, V]) latest(ctx context.Context, meta M) (V, error) {
	var v V
	m, err := metaValue(meta)
	if err != nil {
		return v, err
	}
	if _, err := ts.ready(ctx); err != nil {
		return v, err
	}
	patterns.OperationFrom(ctx).Sent(1)
	err = ts.s.coll.FindOne(ctx, ts.s.seriesFilter(m), options.FindOne().SetSort(ts.s.newestByTime())).Decode(&v)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return v, notFound(m)
	}
	return v, srverr.Classify(err)
}
