package bucket

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
// may or may not be stored. The driver's retryable writes make a retried
// send apply once.
//
// Bad input (see [Config], [New]; a meta that is not an equality match; a
// zero time; a value that is missing, not a number, NaN or infinite)
// returns [patterns.ErrInvalid]; a measurement so large that Cap of them
// could pass 16 MiB returns [patterns.ErrTooLarge]. Nothing is written
// then.
func (b *Buckets[M, V]) Add(ctx context.Context, meta M, v V) error {
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
	for attempt := 1; ; attempt++ {
		err := srverr.Retry(ctx, func() error {
			_, err := b.s.coll.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
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
	}
}

// conflict is the error of a bucket write refused with a duplicate key
// attempts times.
func conflict(attempts int, err error) error {
	return fmt.Errorf("%d duplicate-key errors on the bucket upsert (is there a unique index on the bucket key?): %w: %w", attempts, err, patterns.ErrConflict)
}

// AddMany stores many measurements, of any series, in one bulk write: one
// upsert per measurement, each exactly the one [Buckets.Add] sends, so the
// guarantees are the same (cap, bucket bound, summaries). The driver sends
// them in one update command (it splits beyond 100,000 measurements or 48
// MB). On FerretDB it sends one upsert per command: FerretDB runs the
// statements of an update command in order, stops at the first error and
// reports it at index 0, which would leave the outcome of the others
// unknown. The bulk is unordered: each upsert adds or raises to commutative
// totals ($inc, $min, $max) and pushes into an array that readers sort by
// time, so the buckets end the same whatever the order, and an error in
// one measurement does not stop the others.
//
// All measurements are validated first: a bad one returns
// [patterns.ErrInvalid] naming its index, and nothing is written.
// Upserts that fail with a duplicate-key error are retried, up to three
// times in all. If the server refuses some measurements, AddMany returns a
// [*PartialError] listing them; every other measurement is stored once.
// Any other error (a network error the driver could not retry, a timeout,
// a write concern error) leaves it unknown which were stored. Between the
// upserts, readers see the batch partly applied, each bucket consistent.
func (b *Buckets[M, V]) AddMany(ctx context.Context, points []Point[M, V]) error {
	return pkg.Wrap("AddMany", b.addMany(ctx, points))
}

func (b *Buckets[M, V]) addMany(ctx context.Context, points []Point[M, V]) error {
	p, err := b.ready(ctx)
	if err != nil {
		return err
	}
	models := make([]mongo.WriteModel, len(points))
	for i, pt := range points {
		filter, update, err := b.upsert(pt.Meta, pt.Value)
		if err != nil {
			return fmt.Errorf("point %d: %w", i, err)
		}
		models[i] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true)
	}
	limit := 0
	if !p.batchedUpdates {
		limit = 1
	}
	return bulkWrite(ctx, b.s.coll, models, limit)
}

// bulkWrite sends models unordered, at most limit per command (no limit
// when 0), and retries those that fail with a duplicate-key error, up to
// maxAttempts in all; it reports the rest as a [*PartialError].
func bulkWrite(ctx context.Context, coll *mongo.Collection, models []mongo.WriteModel, limit int) error {
	pending := make([]int, len(models)) // indexes into models
	for i := range pending {
		pending[i] = i
	}
	if limit <= 0 {
		limit = max(len(models), 1)
	}
	var failed []int
	var first error
	for attempt := 1; len(pending) > 0; attempt++ {
		var retry []int
		for chunk := range slices.Chunk(pending, limit) {
			batch := make([]mongo.WriteModel, len(chunk))
			for i, at := range chunk {
				batch[i] = models[at]
			}
			_, err := coll.BulkWrite(ctx, batch, options.BulkWrite().SetOrdered(false))
			if err == nil {
				continue
			}
			bwe, ok := errors.AsType[mongo.BulkWriteException](err)
			if !ok || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
				// The server did not say which writes failed, if any did.
				return err
			}
			for _, we := range bwe.WriteErrors {
				at := chunk[we.Index]
				cause := srverr.Classify(we.WriteError)
				if mongo.IsDuplicateKeyError(we.WriteError) {
					if attempt < maxAttempts {
						retry = append(retry, at)
						continue
					}
					cause = conflict(attempt, we.WriteError)
				}
				failed = append(failed, at)
				if first == nil {
					first = cause
				}
			}
		}
		pending = retry
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return &PartialError{Failed: failed, Err: first}
	}
	return nil
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
	if size := b.s.bucketSize(len(m.Value), len(p.raw)); size > patterns.MaxDocumentSize {
		return nil, nil, errs.TooLarge("a measurement of %d bytes: %d of them could make a bucket of %d bytes, more than %d", len(p.raw), b.s.cap, size, patterns.MaxDocumentSize)
	}
	sp := spanOf(&p)
	return b.s.addFilter(m, windowStart(p.at, b.s.window)), b.s.pushUpdate(p.raw, &sp), nil
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
