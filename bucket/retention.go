package bucket

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// DeleteBefore deletes, for every series, the buckets whose measurements
// are all before t (last < t), with one deleteMany. A bucket that straddles
// t is kept whole, so up to one window of measurements before t may remain
// per series (as with the TTL of Config.TTL, and as a native time-series
// collection expires whole buckets too); [Buckets.Range] and
// [Buckets.Summaries] from t on never show them. Removing them one by one
// would rewrite the bucket and its summary, for little gain.
//
// The filter {start: {$lt: t}, last: {$lt: t}} is served by the index
// {start: 1} of [Buckets.Indexes]: the server reads the index entries of
// the buckets that start before t (those it deletes, and those of the
// windows that straddle t) and fetches those buckets, nothing else. The
// server deletes bucket by bucket: a concurrent reader
// sees each bucket whole or not at all, and may see some of the old
// buckets gone and others not yet. A concurrent Add of a measurement
// before t may land in a bucket about to be deleted. Running it again is
// harmless, so a delete that FerretDB 2.x aborts on a deadlock is sent
// again (see [srverr.Retry]). A zero t returns [patterns.ErrInvalid].
func (b *Buckets[M, V]) DeleteBefore(ctx context.Context, t time.Time) (err error) {
	ctx, op := b.start(ctx, "DeleteBefore")
	defer op.Finish(&err)
	return pkg.Wrap("DeleteBefore", b.s.deleteBefore(ctx, nil, true, t, b.canDelete, b.s.expiredFilter))
}

// DeleteSeriesBefore is [Buckets.DeleteBefore] for the series meta only,
// with one deleteMany: {<meta>: meta, start: {$lt: t}, last: {$lt: t}},
// whose equality on the meta and range on start are bounds of the index
// {<meta>, start, count}. A bad meta returns [patterns.ErrInvalid].
func (b *Buckets[M, V]) DeleteSeriesBefore(ctx context.Context, meta M, t time.Time) (err error) {
	ctx, op := b.start(ctx, "DeleteSeriesBefore")
	defer op.Finish(&err)
	return pkg.Wrap("DeleteSeriesBefore", b.s.deleteBefore(ctx, meta, false, t, b.canDelete, b.s.expiredFilter))
}

func (b *Buckets[M, V]) canDelete(ctx context.Context) error {
	_, err := b.ready(ctx)
	return err
}

// deleteBefore deletes, with one deleteMany, the documents that filter
// selects for the series meta (for every series when all) and t, once
// canDelete says the store may.
func (s *settings) deleteBefore(ctx context.Context, meta any, all bool, t time.Time, canDelete func(context.Context) error, filter func(*bson.RawValue, bson.DateTime) bson.D) error {
	if err := checkTime("t", t); err != nil {
		return err
	}
	var m *bson.RawValue
	if !all {
		v, err := metaValue(meta)
		if err != nil {
			return err
		}
		m = &v
	}
	if err := canDelete(ctx); err != nil {
		return err
	}
	f := filter(m, bson.NewDateTimeFromTime(t))
	op := patterns.OperationFrom(ctx)
	return srverr.Classify(srverr.Retry(ctx, func() error {
		op.Sent(1)
		res, err := s.coll.DeleteMany(ctx, f)
		if err == nil {
			op.Affected(res.DeletedCount)
		}
		return err
	}))
}
