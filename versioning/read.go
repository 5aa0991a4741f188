package versioning

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Get returns the document id as T.
//
// A document at the current version costs one command (find). An older
// one is migrated in memory, decoded into T and, unless
// Config.NoWriteBack, written back as T's encoding (as Insert writes it:
// each value in T's BSON type), followed by the fields T does not declare
// as the migrations left them, with a compare-and-set (one replaceOne, sent again after a transient
// failure such as FerretDB 2.x's deadlock, which applied nothing); if a
// concurrent writer changed it since the read, Get reads it again (one
// find) and migrates what it finds, up to 4 times, and then returns the
// last document it read, migrated, without storing it. Concurrent readers
// of one old document may each migrate it; one write-back wins and the
// others re-read the winner's document. Get needs no optional feature of
// the server. A failure of the connection at the write-back is Get's
// error (the document is stored as it was, or migrated); Get is safe to
// retry.
//
// Errors: [patterns.ErrInvalid] for a bad id, [patterns.ErrNotFound],
// [ErrNewerSchema] for a document newer than Config.Current, and
// [ErrMigration] (a [*MigrationError] for a failing step) for a document
// that cannot be migrated, which is left untouched. An error of the
// write-back itself (a unique index, a validator) is returned too.
func (r *Repo[T]) Get(ctx context.Context, id any) (_ T, err error) {
	ctx, op := r.start(ctx, "Get")
	defer op.Finish(&err)
	var zero T
	if err := txn.Refuse(ctx); err != nil {
		return zero, pkg.Wrap("Get", err)
	}
	if err := patterns.ValidateID(id); err != nil {
		return zero, pkg.Wrap("Get", err)
	}
	raw, err := r.findRaw(ctx, id)
	if err != nil {
		return zero, pkg.Wrap("Get", r.ofDoc(id, err))
	}
	t, err := r.load(ctx, raw)
	if err != nil {
		return zero, pkg.Wrap("Get", r.ofDoc(id, err))
	}
	return t, nil
}

// Find returns the documents that match filter, each as T, in ascending
// _id order (the server's sort order of BSON values), each document once,
// whatever others write meanwhile and whatever its _id (a NaN, a symbol,
// MaxKey...). It reads them a page per find ({_id: {$gt: <the last one
// read>}} or of a type sorted after it, sorted by _id, limited to the
// page's size: the options' BatchSize, or [DefaultBatchSize]; a page
// shorter than that is the last, after which, unless it is the first, one
// more find reads the greatest _id that matches, and the pages go on when
// it is of a type sorted after timestamps: JavaScript, a DBPointer,
// MaxKey), and spends
// for each document below the current version what [Repo.Get] spends to
// write it back, before the next page is read. One long cursor would not
// do: a cursor may return a rewritten document again (FerretDB 2.x does,
// and MongoDB can when an update moves a document's index entry), and
// Find rewrites what it reads. Memory is bounded by a page.
//
// Options pass through to the driver, except those that would break the
// order or hide fields, refused with [patterns.ErrInvalid]: a projection
// (a migration needs the whole document), a sort other than {_id: 1}, and
// Skip. Limit bounds the documents yielded.
//
// The filter runs on the documents as stored, at whatever version: a
// filter on a field that a migration introduces or renames misses the
// documents not yet migrated. Run [Repo.MigrateAll] before relying on
// such filters.
//
// Old documents are written back as by [Repo.Get]: a write-back that
// loses to a concurrent writer re-reads the document, and Find yields what
// it re-read, migrated; a document deleted meanwhile is skipped, as one
// deleted before its page was read is. Limit bounds the documents read,
// so such a document counts against it. Find needs no optional feature of
// the server.
//
// A document that cannot be read ([ErrNewerSchema], [ErrMigration], a
// failed write-back) is yielded as an error and iteration goes on if the
// loop continues; an error of a find ends it. After a failure of the
// connection, Find is safe to run again: documents written back stay
// migrated, the others are migrated then.
func (r *Repo[T]) Find(ctx context.Context, filter any, opts ...options.Lister[options.FindOptions]) iter.Seq2[T, error] {
	if err := txn.Refuse(ctx); err != nil {
		return r.findErr(ctx, pkg.Wrap("Find", err))
	}
	fo, err := listers.Merged(opts)
	if err == nil {
		err = checkFindOptions(&fo)
	}
	if err != nil {
		return r.findErr(ctx, pkg.Wrap("Find", err))
	}
	size := DefaultBatchSize
	if fo.BatchSize != nil && *fo.BatchSize > 0 {
		size = int(*fo.BatchSize)
	}
	var limit int64
	if fo.Limit != nil {
		limit = max(*fo.Limit, -*fo.Limit) // the driver reads a negative limit as one batch of its size
	}
	return func(yield func(T, error) bool) {
		ctx, op := r.start(ctx, "Find")
		var last error // the last error yielded, which the operation ends with
		defer op.Finish(&last)
		for page, err := range keyset.Pages(ctx, r.coll, filter, min(size, maxCursorBatch), limit, opts...) {
			if err != nil {
				var zero T
				last = pkg.Wrap("Find", r.ofColl(err))
				yield(zero, last)
				return
			}
			for _, raw := range page {
				t, err := r.load(ctx, raw)
				if errors.Is(err, errGone) {
					continue // as if deleted before its page was read
				}
				if err != nil {
					err = pkg.Wrap("Find", r.ofDoc(raw.Lookup("_id"), err))
					last = err
				}
				if !yield(t, err) {
					return
				}
			}
		}
	}
}

// findErr is the iterator of a Find refused before it sends anything:
// each iteration reports an operation that yields err.
func (r *Repo[T]) findErr(ctx context.Context, err error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		_, op := r.start(ctx, "Find")
		defer op.Finish(&err)
		var zero T
		yield(zero, err)
	}
}

// checkFindOptions refuses the options of Find that would hide fields
// from the migrations or break its scan in _id order.
func checkFindOptions(fo *options.FindOptions) error {
	if fo.Projection != nil {
		return errs.Invalid("a projection would hide fields from the migrations")
	}
	if fo.Skip != nil && *fo.Skip != 0 {
		return errs.Invalid("Skip: Find reads in pages of _id order; filter on _id instead")
	}
	if fo.Sort == nil {
		return nil
	}
	typ, data, err := bson.MarshalValue(fo.Sort)
	if err == nil && typ == bson.TypeEmbeddedDocument {
		if elems, _ := bson.Raw(data).Elements(); len(elems) == 1 && elems[0].Key() == "_id" {
			if n, ok := elems[0].Value().AsFloat64OK(); ok && n == 1 {
				return nil
			}
		}
	}
	return errs.Invalid("a sort other than {_id: 1}: Find reads in pages of _id order, each document once")
}

// load returns the stored document raw as T, migrating it when it is
// older and writing it back when configured; a lost write-back re-reads.
func (r *Repo[T]) load(ctx context.Context, raw bson.Raw) (T, error) {
	for attempt := 1; ; attempt++ {
		t, migrated, err := r.upgrade(raw)
		if err != nil || migrated == nil || !r.writeBack {
			return t, err
		}
		won, err := r.writeBackDoc(ctx, raw, migrated)
		if err != nil {
			var zero T
			return zero, err
		}
		if won {
			patterns.OperationFrom(ctx).Affected(1)
		}
		if won || attempt == maxAttempts {
			return t, nil
		}
		if raw, err = r.findRaw(ctx, raw.Lookup("_id")); err != nil {
			if errors.Is(err, patterns.ErrNotFound) {
				err = errGone
			}
			var zero T
			return zero, err
		}
	}
}

// errGone is load's error for a document deleted by another writer while
// load wrote it back: Get returns it, Find skips the document.
var errGone = fmt.Errorf("deleted while its migration was written back: %w", patterns.ErrNotFound)

// writeBackDoc replaces the stored document old with migrated if nobody
// wrote it since it was read, and reports whether it did.
func (r *Repo[T]) writeBackDoc(ctx context.Context, old, migrated bson.Raw) (bool, error) {
	won, err := r.replaceOne(ctx, r.casFilter(old), migrated)
	if err != nil {
		return false, fmt.Errorf("write back the migrated document: %w", err)
	}
	if !won {
		patterns.OperationFrom(ctx).Lost() // a writer changed it since the read
	}
	return won, nil
}
