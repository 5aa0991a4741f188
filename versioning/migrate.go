package versioning

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// DefaultBatchSize is the number of documents MigrateAll reads and writes
// per round trip when MigrateOptions.BatchSize is 0.
const DefaultBatchSize = 500

// MigrateOptions tunes [Repo.MigrateAll]. The zero value works.
type MigrateOptions struct {
	// BatchSize is the number of documents read per batch of the cursor
	// and written per bulk write; it bounds memory. 0 means
	// [DefaultBatchSize].
	BatchSize int

	// Progress, when set, is called after each batch with the documents
	// handled so far (migrated, skipped and failed) and the total found to
	// migrate when the run started (grown if more turn up). Setting it
	// costs one count command at the start.
	Progress func(done, total int)

	// MaxFailures stops the run once that many documents have failed; 0
	// means no limit. A broken migration then fails fast instead of
	// visiting the whole collection.
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

// MigrateAll migrates every document below the current version (and every
// document whose version field does not hold an integer, to report it).
// It reads them with one cursor (find, then a getMore per batch), migrates
// each batch in memory and writes it with one unordered bulkWrite of
// replaceOnes, each guarded by the compare-and-set filter of [Repo.Get]:
// so a document a reader or writer changed since the scan read it is
// skipped, not overwritten, and no document is ever migrated twice. Memory
// is bounded by one batch (and the list of failures).
//
// On FerretDB 1.x it writes one replaceOne per document instead, with the
// same filters: FerretDB keeps an SQLite connection open for each
// statement of an update command until the command ends, which makes a
// bulk write slower per document than single writes and hangs it from
// about 100 statements; it also fails a whole command on a unique-index
// violation instead of reporting that one write. The path is chosen once
// per repository, from [patterns.Capabilities] (cached per client). There,
// every write guarded by more than the _id scans the collection (FerretDB
// 1.x pushes down only a filter on _id alone): a dev server's cost, not
// MongoDB's.
//
// It is resumable: documents migrated stay migrated, so after a
// cancellation or an error, running it again migrates the rest. Several
// runs may overlap (two instances of a service): each document is written
// by one of them, the others count it skipped. Readers meanwhile see
// documents before or after their migration, each complete; Get migrates
// on the fly the ones not reached yet.
//
// Documents newer than Config.Current are left alone. Create the index
// from [Repo.Indexes] first, or the scan reads the whole collection.
//
// The result counts the batches completed. The error is nil only when the
// scan finished and no document failed: it is the context's or the
// server's error if the run stopped, and wraps [ErrMigration] when
// documents failed (listed in the result) or MaxFailures was reached.
func (r *Repo[T]) MigrateAll(ctx context.Context, opts MigrateOptions) (MigrateResult, error) {
	res, err := r.migrateAll(ctx, opts)
	if err != nil {
		return res, r.errorf("MigrateAll", nil, err)
	}
	return res, nil
}

func (r *Repo[T]) migrateAll(ctx context.Context, opts MigrateOptions) (MigrateResult, error) {
	var res MigrateResult
	batch := opts.BatchSize
	if batch <= 0 {
		batch = DefaultBatchSize
	}
	path, err := r.writePath(ctx)
	if err != nil {
		return res, err
	}
	filter := r.scanFilter()
	total := 0
	if opts.Progress != nil {
		n, err := r.coll.CountDocuments(ctx, filter)
		if err != nil {
			return res, fmt.Errorf("count the documents to migrate: %w", err)
		}
		total = int(n)
	}
	batches := seq.Batches(ctx, batch, func(ctx context.Context) (*mongo.Cursor, error) {
		return r.coll.Find(ctx, filter, options.Find().SetBatchSize(int32(min(batch, 1<<30))))
	})

	// The batch grows as documents arrive: BatchSize bounds it, the
	// server's reply (at most 16 MiB) bounds it too, and a large BatchSize
	// over a small collection costs nothing.
	var olds []bson.Raw
	var models []*mongo.ReplaceOneModel
	// flush writes what the batch read so far and reports progress. Each
	// batch is written before the cursor's next getMore: one bulk write per
	// batch.
	flush := func() error {
		if err := r.writeBatch(ctx, path, olds, models, &res); err != nil {
			return err
		}
		olds, models = olds[:0], models[:0]
		if opts.Progress != nil {
			done := res.Migrated + res.Skipped + len(res.Failed)
			total = max(total, done)
			opts.Progress(done, total)
		}
		return nil
	}
	for docs, err := range batches {
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
				models = append(models, mongo.NewReplaceOneModel().SetFilter(r.casFilter(raw)).SetReplacement(migrated))
			}
			if opts.MaxFailures > 0 && len(res.Failed) >= opts.MaxFailures {
				if err := flush(); err != nil {
					return res, err
				}
				return res, fmt.Errorf("%w: stopped after %d failed documents (MaxFailures)", ErrMigration, len(res.Failed))
			}
		}
		if err := flush(); err != nil {
			return res, err
		}
	}
	if n := len(res.Failed); n > 0 {
		return res, fmt.Errorf("%w: %d documents failed, the first %v: %w", ErrMigration, n, res.Failed[0].ID, res.Failed[0].Err)
	}
	return res, nil
}

// writePath is how MigrateAll writes a batch, chosen once per repository
// from the server (see [Repo.MigrateAll]).
type writePath int

const (
	pathBulk writePath = iota + 1 // one unordered bulkWrite per batch (MongoDB)
	pathEach                      // one replaceOne per document (FerretDB 1.x, unrecognised servers)
)

// writePath returns the repository's write path, deciding it on first
// use: bulk writes where the server has [patterns.FeatureBatchedUpdates].
func (r *Repo[T]) writePath(ctx context.Context) (writePath, error) {
	return r.path.Get(ctx, func(ctx context.Context) (writePath, error) {
		srv, err := patterns.Capabilities(ctx, r.coll.Database().Client())
		if err != nil {
			return 0, err
		}
		if srv.Has(patterns.FeatureBatchedUpdates) {
			return pathBulk, nil
		}
		return pathEach, nil
	})
}

// writeBatch writes one batch of migrated documents and adds the outcome
// to res: a replaceOne that matched is a migrated document, one that did
// not lost a race, one the server refused failed. An error that is not
// about one document (the network, the context, a bulk write failing as a
// whole) stops the run.
func (r *Repo[T]) writeBatch(ctx context.Context, path writePath, olds []bson.Raw, models []*mongo.ReplaceOneModel, res *MigrateResult) error {
	if len(models) == 0 {
		return nil
	}
	if path == pathEach {
		for i, m := range models {
			one, err := r.coll.ReplaceOne(ctx, m.Filter, m.Replacement)
			switch {
			case err == nil && one.MatchedCount == 1:
				res.Migrated++
			case err == nil:
				res.Skipped++
			case ctx.Err() != nil || mongo.IsNetworkError(err) || mongo.IsTimeout(err):
				return fmt.Errorf("replace migrated document %v: %w", idOf(olds[i]), err)
			default:
				// The server refused this one document (FerretDB reports
				// a unique-index violation as a command error, not a
				// write error).
				res.Failed = append(res.Failed, Failure{ID: idOf(olds[i]), Err: fmt.Errorf("write the migrated document: %w", err)})
			}
		}
		return nil
	}
	writes := make([]mongo.WriteModel, len(models))
	for i, m := range models {
		writes[i] = m
	}
	bw, err := r.coll.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
	bwe, isBulk := errors.AsType[mongo.BulkWriteException](err)
	if err != nil && (!isBulk || bwe.WriteConcernError != nil) {
		return fmt.Errorf("bulk write of %d migrated documents: %w", len(models), err)
	}
	for _, we := range bwe.WriteErrors {
		res.Failed = append(res.Failed, Failure{ID: idOf(olds[we.Index]), Err: fmt.Errorf("write the migrated document: %w", we.WriteError)})
	}
	matched := int(bw.MatchedCount)
	res.Migrated += matched
	res.Skipped += len(models) - matched - len(bwe.WriteErrors)
	return nil
}
