package bucket

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxAttempts bounds the tries of one upsert that keeps failing with a
// duplicate-key error.
const maxAttempts = 3

// Add stores one measurement of the series meta with one upsert, one round
// trip: into a bucket of the series for the measurement's window that
// holds fewer than Cap measurements, or into a new bucket when there is
// none. The same update pushes the measurement, adds one to the count and
// the value to each sum, and lowers or raises first, last, min and max,
// so a reader never sees a bucket whose summary disagrees with its
// measurements.
//
// Concurrent writers may each open a bucket for the same window: N
// measurements of one window make at most ceil(N/Cap) + (writers - 1)
// buckets, and none holds more than Cap. A duplicate-key error (only
// possible where someone added a unique index on the bucket key, which
// the server does not retry for a filter with $lt) is retried up to
// three times, then reported as [patterns.ErrConflict]. An upsert that
// FerretDB 2.x aborts on a deadlock applied nothing and is sent again, up
// to five times in all (see [srverr.Retry]).
//
// Add is not idempotent: after an error that leaves the outcome unknown (a
// timeout, a network error the driver could not retry), the measurement
// is stored once or not at all, and calling Add again may store it twice.
// The driver's retryable writes (on a replica set) make its own retry of
// a send apply once. A write that is exact to retry after any error is
// [Buckets.AddMany], also of one measurement (a find, then a write).
//
// Bad input (see [Config], [New]; a meta that is not an equality match; a
// zero time; a value that is missing, not a number, NaN or infinite)
// returns [patterns.ErrInvalid]; a measurement so large that Cap of them
// could pass 16 MiB returns [patterns.ErrTooLarge]. Nothing is written
// then.
func (b *Buckets[M, V]) Add(ctx context.Context, meta M, v V) (err error) {
	ctx, op := b.start(ctx, "Add")
	defer op.Finish(&err)
	return pkg.Wrap("Add", b.add(ctx, meta, v))
}

func (b *Buckets[M, V]) add(ctx context.Context, meta M, v V) error {
	if _, err := b.ready(ctx); err != nil {
		return err
	}
	filter, update, err := b.upsert(meta, v)
	if err != nil {
		return err
	}
	op := patterns.OperationFrom(ctx)
	for attempt := 1; ; attempt++ {
		err := srverr.Retry(ctx, func() error {
			op.Sent(1)
			res, err := b.s.coll.UpdateOne(ctx, filter, update, upsertOne)
			if err == nil {
				op.Affected(res.ModifiedCount + res.UpsertedCount)
			}
			return err
		})
		switch {
		case err == nil:
			return nil
		case !mongo.IsDuplicateKeyError(err):
			return srverr.Classify(err)
		case attempt == maxAttempts:
			return conflict(attempt, err)
		}
		op.Retried(err)
	}
}

// upsertOne are the options of Add's upsert, built once.
var upsertOne = options.UpdateOne().SetUpsert(true)

// conflict is the error of a bucket write refused with a duplicate key
// attempts times.
func conflict(attempts int, err error) error {
	return fmt.Errorf("%d duplicate-key errors on the bucket upsert (is there a unique index on the bucket key?): %w: %w", attempts, err, patterns.ErrConflict)
}

// upsert validates one measurement and builds its bucket upsert.
func (b *Buckets[M, V]) upsert(meta M, v V) (filter, update bson.D, err error) {
	m, err := metaValue(meta)
	if err != nil {
		return nil, nil, err
	}
	p, err := b.s.parse(v)
	if err != nil {
		return nil, nil, err
	}
	if err := b.s.checkSize(m, &p); err != nil {
		return nil, nil, err
	}
	sp := spanOf(&p)
	return b.s.addFilter(m, windowStart(p.at, b.s.window)), b.s.pushUpdate(p.raw, &sp, nil), nil
}

// checkSize rejects a measurement so large that Cap of them could pass
// 16 MiB.
func (s *settings) checkSize(m bson.RawValue, p *point) error {
	if size := s.bucketSize(len(m.Value), len(p.raw)); size > patterns.MaxDocumentSize {
		return errs.TooLarge("a measurement of %d bytes: %d of them could make a bucket of %d bytes, more than %d", len(p.raw), s.cap, size, patterns.MaxDocumentSize)
	}
	return nil
}

// windowStart is the start of the window that holds t: windows are aligned
// on the Unix epoch.
func windowStart(t bson.DateTime, window int64) bson.DateTime {
	r := int64(t) % window
	if r < 0 {
		r += window
	}
	return t - bson.DateTime(r)
}
