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
// It sends one find on the index {<meta>, start, count} (see
// [Buckets.Indexes]), plus a getMore per batch of buckets, and nothing
// until iteration starts. The buckets of one window may be several
// partial ones whose measurements interleave in time: Range holds the
// buckets of one window at a time, merges their measurements and sorts
// them, so memory is bounded by one window, not by the interval. Buckets of different
// windows do not overlap in time, so no more is needed.
//
// Concurrent writes may or may not be seen: each bucket is read as one
// consistent document, at one instant of the call, and the buckets one
// after the other, so a measurement added during the iteration to a
// window already yielded does not appear, and one added to any other
// window may or may not: the cursor answers from the batches it fetched,
// which may hold windows not yet yielded as they were before the write.
// (MongoDB
// may return a bucket twice when a write moves its entry in the index
// that serves the find, whose key holds the count; Range keeps the later
// copy, which holds the earlier one's measurements and more.) A window
// that holds one bucket is read at one instant: the concurrent writers of
// a window open a bucket each at most (see [Buckets.Add]).
//
// A bad meta, a zero from or to, or to before from yield one
// [patterns.ErrInvalid] error; from == to yields nothing and sends
// nothing.
func (b *Buckets[M, V]) Range(ctx context.Context, meta M, from, to time.Time) iter.Seq2[V, error] {
	return readSeq(ctx, b, "Range", meta, from, to, nil, func(r read) iter.Seq2[V, error] {
		open := func(ctx context.Context) (*mongo.Cursor, error) {
			return b.s.coll.Find(ctx, b.s.overlapFilter(r), options.Find().SetSort(byStart()).SetProjection(rangeProjection()))
		}
		return func(yield func(V, error) bool) {
			ctx, op := b.start(ctx, "Range")
			out, errp := observe(op, yield)
			defer op.Finish(errp)
			if _, err := b.ready(ctx); err != nil {
				var zero V
				out(zero, failed("Range", err))
				return
			}
			var window []rangeBucket // the buckets of one window
			for bk, err := range seq.Cursor[rangeBucket](ctx, open) {
				if err != nil {
					var zero V
					out(zero, failed("Range", err))
					return
				}
				if len(window) > 0 && bk.Start != window[0].Start {
					if !yieldWindow(b.s.timeField, window, r, out) {
						return
					}
					window = window[:0]
				}
				window = append(window, bk)
			}
			yieldWindow(b.s.timeField, window, r, out)
		}
	})
}

// rangeBucket is what Range and Latest read of a bucket.
type rangeBucket struct {
	ID     bson.ObjectID `bson:"_id"`
	Start  bson.DateTime `bson:"start"`
	Points []bson.Raw    `bson:"measurements"`
}

// latest returns the buckets of one window sorted by id, one copy of
// each: of a bucket a find returned twice (a write moved its index entry
// ahead of the cursor), the copy with the most measurements, which holds
// the other's and later ones, since measurements are only ever added to
// a bucket.
func latest[B any](window []B, id func(*B) bson.ObjectID, size func(*B) int) []B {
	slices.SortStableFunc(window, func(a, b B) int { x, y := id(&a), id(&b); return bytes.Compare(x[:], y[:]) })
	out := window[:0]
	for i := range window {
		if n := len(out); n > 0 && id(&out[n-1]) == id(&window[i]) {
			if size(&window[i]) > size(&out[n-1]) {
				out[n-1] = window[i]
			}
			continue
		}
		out = append(out, window[i])
	}
	return out
}

// yieldWindow yields, in time order, the measurements in [r.from, r.to)
// of the buckets of one window, and reports whether to go on.
func yieldWindow[V any](timeField string, window []rangeBucket, r read, yield func(V, error) bool) bool {
	type timed struct {
		at  bson.DateTime
		raw bson.Raw
	}
	var pts []timed
	for _, bk := range latest(window, func(b *rangeBucket) bson.ObjectID { return b.ID }, func(b *rangeBucket) int { return len(b.Points) }) {
		for _, raw := range bk.Points {
			at, err := timeOf(raw, timeField)
			if err != nil {
				var zero V
				yield(zero, pkg.Wrap("Range", fmt.Errorf("bucket %s: %w", bk.ID.Hex(), err)))
				return false
			}
			if r.from <= at && at < r.to {
				pts = append(pts, timed{at, raw})
			}
		}
	}
	slices.SortStableFunc(pts, func(a, b timed) int { return cmp.Compare(a.at, b.at) })
	for _, p := range pts {
		var v V
		if err := bson.Unmarshal(p.raw, &v); err != nil {
			yield(v, pkg.Wrap("Range", fmt.Errorf("decode a measurement: %w", err)))
			return false
		}
		if !yield(v, nil) {
			return false
		}
	}
	return true
}
