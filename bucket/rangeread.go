package bucket

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/seq"
)

// Range yields the measurements of the series meta whose time t satisfies
// from <= t < to (compared at the millisecond precision of BSON dates), in
// time order across buckets; measurements with equal times come in a
// fixed order (by bucket, then by arrival).
//
// It sends one find on the index {<meta>, start} (see [Buckets.Indexes]),
// plus a getMore per batch of buckets, and nothing until iteration starts.
// The buckets of one window may be several partial ones whose
// measurements interleave in time: Range holds the buckets of one window
// at a time, merges their measurements and sorts them, so memory is
// bounded by one window, not by the interval. Buckets of different
// windows do not overlap in time, so no more is needed.
//
// Concurrent writes may or may not be seen: each bucket is read as one
// consistent document, but a measurement added during the iteration to a
// window not yet read appears, and one added to a window already yielded
// does not.
//
// A bad meta, a zero from or to, or to before from yield one
// [patterns.ErrInvalid] error; from == to yields nothing and sends
// nothing.
func (b *Buckets[M, V]) Range(ctx context.Context, meta M, from, to time.Time) iter.Seq2[V, error] {
	filter, empty, err := b.overlapping(meta, from, to)
	switch {
	case err != nil:
		return seq.Err[V](fmt.Errorf("bucket: Range: %w", err))
	case empty:
		return func(func(V, error) bool) {}
	}
	lo, hi := bson.NewDateTimeFromTime(from), bson.NewDateTimeFromTime(to)
	open := func(ctx context.Context) (*mongo.Cursor, error) {
		if _, err := b.ready(ctx); err != nil {
			return nil, err
		}
		return b.s.coll.Find(ctx, filter, options.Find().
			SetSort(bson.D{{Key: fieldStart, Value: 1}}).
			SetProjection(bson.D{{Key: fieldStart, Value: 1}, {Key: fieldPoints, Value: 1}}))
	}
	return func(yield func(V, error) bool) {
		var window []rangeBucket // the buckets of one window
		for bk, err := range seq.Cursor[rangeBucket](ctx, open) {
			if err != nil {
				var zero V
				yield(zero, fmt.Errorf("bucket: Range: %w", err))
				return
			}
			if len(window) > 0 && bk.Start != window[0].Start {
				if !yieldWindow(b.s.timeField, window, lo, hi, yield) {
					return
				}
				window = window[:0]
			}
			window = append(window, bk)
		}
		yieldWindow(b.s.timeField, window, lo, hi, yield)
	}
}

// rangeBucket is what Range reads of a bucket.
type rangeBucket struct {
	ID     bson.ObjectID `bson:"_id"`
	Start  bson.DateTime `bson:"start"`
	Points []bson.Raw    `bson:"measurements"`
}

// yieldWindow yields, in time order, the measurements in [lo, hi) of the
// buckets of one window, and reports whether to go on.
func yieldWindow[V any](timeField string, window []rangeBucket, lo, hi bson.DateTime, yield func(V, error) bool) bool {
	type timed struct {
		at  bson.DateTime
		raw bson.Raw
	}
	slices.SortFunc(window, func(a, b rangeBucket) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	var pts []timed
	for _, bk := range window {
		for _, raw := range bk.Points {
			at, err := timeOf(raw, timeField)
			if err != nil {
				var zero V
				yield(zero, fmt.Errorf("bucket: Range: bucket %s: %w", bk.ID.Hex(), err))
				return false
			}
			if lo <= at && at < hi {
				pts = append(pts, timed{at, raw})
			}
		}
	}
	slices.SortStableFunc(pts, func(a, b timed) int { return cmp.Compare(a.at, b.at) })
	for _, p := range pts {
		var v V
		if err := bson.Unmarshal(p.raw, &v); err != nil {
			yield(v, fmt.Errorf("bucket: Range: decode a measurement: %w", err))
			return false
		}
		if !yield(v, nil) {
			return false
		}
	}
	return true
}

// overlapping validates the arguments of a read and builds the filter of
// the buckets of the series that may hold measurements in [from, to): a
// bucket of window start s holds times in [s, s+Window), so s lies in
// (from-Window, to); its first and last times narrow it further. The
// equality on the meta and the range on start are the bounds of the index
// {<meta>: 1, start: 1}.
func (b *Buckets[M, V]) overlapping(meta M, from, to time.Time) (filter bson.D, empty bool, err error) {
	m, err := metaValue(meta)
	if err != nil {
		return nil, false, err
	}
	if empty, err = checkInterval(from, to); err != nil || empty {
		return nil, empty, err
	}
	return b.s.overlapFilter(m, bson.NewDateTimeFromTime(from), bson.NewDateTimeFromTime(to)), false, nil
}

func (s *settings) overlapFilter(m bson.RawValue, from, to bson.DateTime) bson.D {
	return bson.D{
		{Key: s.metaField, Value: m},
		{Key: fieldStart, Value: bson.D{{Key: "$gt", Value: from - bson.DateTime(s.window)}, {Key: "$lt", Value: to}}},
		{Key: fieldFirst, Value: bson.D{{Key: "$lt", Value: to}}},
		{Key: fieldLast, Value: bson.D{{Key: "$gte", Value: from}}},
	}
}
