package versioning

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// MigrateOptions tunes [Repo.MigrateAll]. The zero value works.
type MigrateOptions struct {
	// BatchSize is the most documents read per find and written per bulk
	// write; it bounds memory: the batch grows as documents arrive, so a
	// large BatchSize costs nothing over a small collection. 0 means
	// [DefaultBatchSize]; at most MaxInt32.
	BatchSize int

	// Progress, when set, is called after each batch with the documents
	// handled so far (migrated, skipped and failed) and the total found to
	// migrate when the run started (grown if more turn up). Setting it
	// costs one count command at the start.
	Progress func(done, total int)

	// MaxFailures stops the run once that many documents have failed; 0
	// means no limit (negative is invalid). A broken migration then fails
	// fast instead of visiting the whole collection.
	MaxFailures int
}

// MigrateResult counts what [Repo.MigrateAll] did.
type MigrateResult struct {
	// Migrated documents were written at the current version.
	Migrated int
	// Skipped documents changed between the scan and the write (a reader
	// migrated them, a writer changed them) and were left to the winner; a
	// document an older release changed is still old, and the next run
	// migrates it.
	Skipped int
	// Failed documents could not be migrated or written; they are
	// untouched.
	Failed []Failure
}

// Failure is a document that [Repo.MigrateAll] could not migrate.
type Failure struct {
	ID  any   // the document's _id
	Err error // a [*MigrationError], an error wrapping [ErrMigration], or the server's write error
}

// maxCursorBatch bounds the documents MigrateAll asks of one find: no
// reply holds more documents (a reply is at most 16 MiB, a document at
// least 5 bytes), and FerretDB 1.x does not answer a find with a filter
// and a batch size of MaxInt32.
const maxCursorBatch = 1 << 22

// normalize returns o with its defaults filled in, or an error wrapping
// patterns.ErrInvalid.
func (o MigrateOptions) normalize() (MigrateOptions, error) {
	if o.BatchSize < 0 || o.BatchSize > math.MaxInt32 {
		return o, errs.Invalid("BatchSize is %d: want 0 (the default, %d) to %d", o.BatchSize, DefaultBatchSize, math.MaxInt32)
	}
	if o.MaxFailures < 0 {
		return o, errs.Invalid("MaxFailures is %d: want 0 (no limit) or more", o.MaxFailures)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	return o, nil
}

// MigrateAll migrates every document below the current version (and every
// document whose version field does not hold an integer, to report it).
// It reads them in _id order, whatever their _ids (a NaN, a symbol,
// MaxKey...), a batch per find ({_id: {$gt: <the last one read>}} or of a
// type sorted after it, sorted by _id, limited to BatchSize; a batch
// shorter than BatchSize is the last, after which, unless it is the
// first, one more find reads the greatest _id, and the batches go on when
// it is of a type sorted after timestamps: JavaScript, a DBPointer,
// MaxKey), migrates each batch in memory and writes it, each document as
// T's encoding of it (as [Repo.Get] writes back),
// with one unordered bulkWrite of replaceOnes, each guarded by the
// compare-and-set filter of [Repo.Get] (the statements that fail with a
// transient error, FerretDB 2.x's deadlock, which applied nothing, are
// sent again, up to 5 times in all), before reading the next: so a
// document a reader or writer changed since the scan read it is skipped,
// not overwritten, no document is ever migrated twice, and each document
// is counted once (migrated, skipped or failed), whatever others write
// meanwhile: the scan never meets a document again, as one long cursor
// may (FerretDB 2.x returns rewritten documents again). Memory is bounded
// by one batch (and the list of failures). Setting
// MigrateOptions.Progress adds one count command at the start.
//
// Where the server lacks [patterns.FeatureBatchedUpdates] (FerretDB 1.x,
// servers the library does not recognise), it writes one
// replaceOne per document instead, with the same filters, each sent again
// after a transient failure (FerretDB 2.x's deadlock, which applied
// nothing): the constant explains why. The path is part of the
// repository's plan, decided once per repository. On FerretDB 1.x every
// write guarded by more than the _id scans the collection: a dev server's
// cost, not MongoDB's.
//
// It is resumable: documents migrated stay migrated, so after a
// cancellation or an error (the connection failing at any step: the
// count, the scan, a write), running it again migrates the rest, each
// document once. Several runs may overlap (two instances of a service):
// each document is written by one of them, the others count it skipped.
// Readers meanwhile see documents before or after their migration, each
// complete; Get migrates on the fly the ones not reached yet. On FerretDB
// 1.x, these promises about concurrent runs and writers hold for one
// client with one connection: see [patterns.FeatureConcurrentUpdates].
//
// Documents newer than Config.Current are left alone. Create the index
// from [Repo.Indexes] first, or the scan reads the whole collection.
//
// The result counts what the run did until it stopped. A write whose
// reply was lost when the connection failed (one replaceOne, or one
// batch's bulk write) is not counted, though it may have landed, and the
// next run does not count it either: it is no longer old. A failure of
// the connection is not a document's failure: it stops the run and lists
// nothing in Failed; nor is the end of ctx's deadline where the server
// noticed it first (the maxTimeMS the driver sends: FerretDB 2.x reports
// it as a write error of each statement it stopped), which stops the run
// with an error wrapping [context.DeadlineExceeded]. The error is nil only when the scan finished and no
// document failed: it is [patterns.ErrInvalid] for bad options, the
// context's, the connection's or the server's error if the run stopped,
// and wraps [ErrMigration] when documents failed (listed in the result)
// or MaxFailures was reached.
func (r *Repo[T]) MigrateAll(ctx context.Context, opts MigrateOptions) (_ MigrateResult, err error) {
	ctx, op := r.start(ctx, "MigrateAll")
	defer op.Finish(&err)
	res, err := r.migrateAll(ctx, opts)
	op.Affected(int64(res.Migrated))
	if err != nil {
		return res, pkg.Wrap("MigrateAll", r.ofColl(err))
	}
	return res, nil
}

func (r *Repo[T]) migrateAll(ctx context.Context, opts MigrateOptions) (MigrateResult, error) {
	var res MigrateResult
	opts, err := opts.normalize()
	if err != nil {
		return res, err
	}
	p, err := r.plan(ctx)
	if err != nil {
		return res, err
	}
	filter := r.scanFilter()
	total := 0
	op := patterns.OperationFrom(ctx)
	if opts.Progress != nil {
		op.Sent(1)
		n, err := r.coll.CountDocuments(ctx, filter)
		if err != nil {
			return res, fmt.Errorf("count the documents to migrate: %w", err)
		}
		total = int(n)
	}
	// The pages go in _id order, each read after the previous one is
	// written: a document the run (or anyone) rewrites is never met again.
	pages := keyset.Pages(ctx, r.coll, filter, min(opts.BatchSize, maxCursorBatch), 0)

	// The batch grows as documents arrive: a large BatchSize over a small
	// collection costs nothing.
	var olds, news []bson.Raw
	// flush writes what the batch read so far and reports progress. Each
	// page is written before the next one is read.
	flush := func() error {
		if err := r.writeBatch(ctx, p, op, olds, news, &res); err != nil {
			return err
		}
		clear(olds) // let the documents go while the slices are reused
		clear(news)
		olds, news = olds[:0], news[:0]
		if opts.Progress != nil {
			done := res.Migrated + res.Skipped + len(res.Failed)
			total = max(total, done)
			opts.Progress(done, total)
		}
		return nil
	}
	for docs, err := range pages {
		if err != nil {
			return res, err
		}
		for _, raw := range docs {
			_, migrated, err := r.upgrade(raw)
			switch {
			case err != nil:
				res.Failed = append(res.Failed, Failure{ID: idOf(raw), Err: err})
			case migrated == nil: // made current since the scan read it
				res.Skipped++
			default:
				olds = append(olds, raw)
				news = append(news, migrated)
			}
			if opts.MaxFailures > 0 && len(res.Failed) >= opts.MaxFailures {
				if err := flush(); err != nil {
					return res, err
				}
				return res, fmt.Errorf("stopped after %d failed documents (MaxFailures): %w", len(res.Failed), ErrMigration)
			}
		}
		if err := flush(); err != nil {
			return res, err
		}
	}
	if n := len(res.Failed); n > 0 {
		first := res.Failed[0]
		if errors.Is(first.Err, ErrMigration) {
			return res, fmt.Errorf("%d documents failed, the first %s: %w", n, describe(first.ID), first.Err)
		}
		return res, fmt.Errorf("%d documents failed, the first %s: %w: %w", n, describe(first.ID), first.Err, ErrMigration)
	}
	return res, nil
}

// writeBatch writes one batch of migrated documents, news[i] in place of
// olds[i], and adds the outcome to res: a replaceOne that matched is a
// migrated document, one that did not lost a race, one the server refused
// failed. An error that is not about one document (the network, the
// context, a bulk write failing as a whole) stops the run.
func (r *Repo[T]) writeBatch(ctx context.Context, p plan, op *patterns.Operation, olds, news []bson.Raw, res *MigrateResult) error {
	if len(olds) == 0 {
		return nil
	}
	if !p.BulkMigrate {
		for i, old := range olds {
			matched, err := r.replaceOne(ctx, r.casFilter(old), news[i])
			switch {
			case err == nil && matched:
				res.Migrated++
			case err == nil:
				res.Skipped++
			case srverr.Refused(err) && !srverr.TimedOut(err):
				// The server refused this one document (FerretDB 1.x
				// reports a unique-index violation as a command error,
				// not a write error).
				res.Failed = append(res.Failed, Failure{ID: idOf(old), Err: fmt.Errorf("write the migrated document: %w", srverr.Classify(err))})
			default:
				// The connection, the context (or the server's maxTimeMS,
				// which the driver derives from it), the driver's pool:
				// nothing about this document, and the next write would
				// meet it too.
				return fmt.Errorf("replace migrated document %s: %w", describe(old.Lookup("_id")), err)
			}
		}
		return nil
	}
	// Every statement is guarded, so one that failed with a transient
	// error (FerretDB 2.x's deadlock, which applied nothing) is sent again,
	// alone with the others that did, as is a command that failed whole
	// with one.
	pending := make([]int, len(olds)) // indexes into olds of the statements to send
	for i := range pending {
		pending[i] = i
	}
	var again []int
	err := srverr.Retry(ctx, func() error {
		writes := make([]mongo.WriteModel, len(pending))
		for k, i := range pending {
			writes[k] = &mongo.ReplaceOneModel{Filter: r.casFilter(olds[i]), Replacement: news[i]}
		}
		op.Sent(1)
		bw, err := r.coll.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
		bwe, isBulk := errors.AsType[mongo.BulkWriteException](err)
		if err != nil && (!isBulk || bwe.WriteConcernError != nil) {
			return err // a transient one is sent again whole
		}
		again = again[:0]
		var transient, timedOut error
		for _, we := range bwe.WriteErrors {
			switch {
			case srverr.TimedOut(we.WriteError):
				// The deadline (the server's maxTimeMS), not the
				// document: counted nowhere, it stops the run.
				timedOut = we.WriteError
			case srverr.Transient(we.WriteError):
				again, transient = append(again, pending[we.Index]), we.WriteError
			default:
				res.Failed = append(res.Failed, Failure{ID: idOf(olds[pending[we.Index]]), Err: fmt.Errorf("write the migrated document: %w", srverr.Classify(we.WriteError))})
			}
		}
		matched := int(bw.MatchedCount)
		res.Migrated += matched
		res.Skipped += len(pending) - matched - len(bwe.WriteErrors)
		pending = append(pending[:0], again...)
		if timedOut != nil {
			return stopped{timedOut}
		}
		return transient
	})
	var stop stopped
	switch {
	case err == nil:
	case errors.As(err, &stop):
		return fmt.Errorf("bulk write of migrated documents: %w", stop.error)
	case len(again) > 0 && srverr.Transient(err):
		// Still failing after srverr.Attempts sends: these documents failed.
		for _, i := range again {
			res.Failed = append(res.Failed, Failure{ID: idOf(olds[i]), Err: fmt.Errorf("write the migrated document: %w", err)})
		}
	default:
		return fmt.Errorf("bulk write of %d migrated documents: %w", len(pending), err)
	}
	return nil
}

// stopped is the server's time-out of a statement of a bulk write: it
// ends the run, as the deadline it comes from does.
type stopped struct{ error }
