package versioning

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxAttempts bounds the compare-and-set loops: the write-back of a read
// that keeps losing to writers, and a Replace or Update that keeps meeting
// a document that changes under it.
const maxAttempts = 4

// Store is what a service needs from a versioned collection: reads that
// always return the current shape, and writes that stamp the current
// version. [*Repo] implements it; depend on Store to substitute it in unit
// tests.
type Store[T any] interface {
	Get(ctx context.Context, id any) (T, error)
	Find(ctx context.Context, filter any, opts ...options.Lister[options.FindOptions]) iter.Seq2[T, error]
	Insert(ctx context.Context, v T) (any, error)
	Replace(ctx context.Context, id any, v T) error
	Update(ctx context.Context, id any, update any, opts ...options.Lister[options.UpdateOneOptions]) error
	Delete(ctx context.Context, id any) error
}

var _ Store[struct{}] = (*Repo[struct{}])(nil)

// Repo is a collection whose documents carry a schema version. T is the
// current shape (Config.Current); older documents are migrated through the
// chain of [Migration]s when they are read, and written back.
//
// # Concurrency: what the write-back protects
//
// Every write through a Repo stamps the version and a new revision (an
// ObjectID in Config.RevisionField). A migrated document is written back
// with a compare-and-set: a replaceOne filtered on the _id and on the
// version and revision that were read (or their absence). So a write-back
// never overwrites a write that happened after its read if that write:
//   - went through a Repo, of this release or of an older one still
//     running during a rolling deploy (it changed the revision), or
//   - changed the version or the revision field, whoever made it.
//
// The write-back loses, re-reads and migrates what it finds. A write made
// outside this package that changes neither field (a script's $set on an
// old document) is not detected: during such a write, a reader migrating
// the same document may overwrite it. Have such code set the revision to a
// new ObjectID, or stop it while old documents remain (see MigrateAll).
//
// A Repo is safe for concurrent use. Besides its configuration it holds
// only the write path of MigrateAll, detected once.
type Repo[T any] struct {
	coll      *mongo.Collection
	field     string // the version field
	revField  string // the revision field
	current   int
	oldest    int
	implicit  int                // the version of a document without field
	steps     []func(*Doc) error // steps[k-oldest] migrates k to k+1
	writeBack bool

	path lazy.Value[writePath] // how MigrateAll writes, decided on first use
}

// Indexes returns the index that MigrateAll's scan needs: the version
// field, ascending. Create it with [patterns.EnsureIndexes]; without it
// MigrateAll and Stats scan the whole collection.
func (r *Repo[T]) Indexes() []patterns.Index {
	return []patterns.Index{{Collection: r.coll, Model: mongo.IndexModel{Keys: bson.D{{Key: r.field, Value: 1}}}}}
}

// Get returns the document id as T.
//
// A document at the current version costs one command (find). An older
// one is migrated in memory and, unless Config.NoWriteBack, written back
// with a compare-and-set (one replaceOne); if a concurrent writer changed
// it since the read, Get reads it again (one find) and migrates what it
// finds, up to 4 times, and then returns the last document it read,
// migrated, without storing it. Concurrent readers of one old document may
// each migrate it; one write-back wins and the others re-read the winner's
// document.
//
// Errors: [patterns.ErrInvalid] for a bad id, [patterns.ErrNotFound],
// [ErrNewerSchema] for a document newer than Config.Current, and
// [ErrMigration] (a [*MigrationError] for a failing step) for a document
// that cannot be migrated, which is left untouched. An error of the
// write-back itself (a unique index, a validator) is returned too.
func (r *Repo[T]) Get(ctx context.Context, id any) (T, error) {
	t, err := r.get(ctx, id)
	if err != nil {
		return t, r.errorf("Get", id, err)
	}
	return t, nil
}

func (r *Repo[T]) get(ctx context.Context, id any) (T, error) {
	var zero T
	if err := patterns.ValidateID(id); err != nil {
		return zero, err
	}
	raw, err := r.findRaw(ctx, id)
	if err != nil {
		return zero, err
	}
	return r.load(ctx, raw)
}

// Find returns the documents that match filter, each as T: one find and
// one getMore per batch, plus, for each document below the current
// version, what [Repo.Get] spends to write it back. Memory is bounded by
// the cursor's batch. Options pass through to the driver, except a
// projection, refused with [patterns.ErrInvalid]: a migration needs the
// whole document.
//
// The filter runs on the documents as stored, at whatever version: a
// filter on a field that a migration introduces or renames misses the
// documents not yet migrated. Run [Repo.MigrateAll] before relying on
// such filters.
//
// A document that cannot be read ([ErrNewerSchema], [ErrMigration], a
// failed write-back) is yielded as an error and iteration goes on if the
// loop continues; an error of the cursor ends it.
func (r *Repo[T]) Find(ctx context.Context, filter any, opts ...options.Lister[options.FindOptions]) iter.Seq2[T, error] {
	if filter == nil {
		filter = bson.D{}
	}
	fo, err := merged(opts)
	if err != nil {
		return seq.Err[T](r.errorf("Find", nil, err))
	}
	if fo.Projection != nil {
		return seq.Err[T](r.errorf("Find", nil, errs.Invalid("a projection would hide fields from the migrations")))
	}
	raws := seq.Cursor[bson.Raw](ctx, func(ctx context.Context) (*mongo.Cursor, error) {
		return r.coll.Find(ctx, filter, opts...)
	})
	return func(yield func(T, error) bool) {
		for raw, err := range raws {
			if err != nil {
				var zero T
				yield(zero, r.errorf("Find", nil, err))
				return
			}
			t, err := r.load(ctx, raw)
			if err != nil {
				err = r.errorf("Find", idOf(raw), err)
			}
			if !yield(t, err) {
				return
			}
		}
	}
}

// Insert inserts v stamped with the current version and a new revision
// (whatever v's own fields of those names hold) and returns its _id, which
// the driver generates when v has none. One command (insert). A duplicate
// _id is the server's error, as returned by the driver.
func (r *Repo[T]) Insert(ctx context.Context, v T) (any, error) {
	doc, err := r.stamp(v)
	if err != nil {
		return nil, r.errorf("Insert", nil, err)
	}
	res, err := r.coll.InsertOne(ctx, doc)
	if err != nil {
		return nil, r.errorf("Insert", nil, err)
	}
	return res.InsertedID, nil
}

// Replace replaces the document id with v, stamped with the current
// version and a new revision. One command (replaceOne), guarded so that a
// document newer than Config.Current is never downgraded: it is refused
// with [ErrNewerSchema]. When nothing matched, one find tells why:
// [patterns.ErrNotFound], [ErrNewerSchema], or a concurrent change, which
// is retried (up to 4 times, then [patterns.ErrConflict]).
func (r *Repo[T]) Replace(ctx context.Context, id any, v T) error {
	if err := r.replace(ctx, id, v); err != nil {
		return r.errorf("Replace", id, err)
	}
	return nil
}

func (r *Repo[T]) replace(ctx context.Context, id any, v T) error {
	if err := patterns.ValidateID(id); err != nil {
		return err
	}
	doc, err := r.stamp(v)
	if err != nil {
		return err
	}
	return r.guarded(ctx, id, func() (bool, error) {
		res, err := r.coll.ReplaceOne(ctx, r.notNewerFilter(id), doc)
		return err == nil && res.MatchedCount == 1, err
	}, func(raw bson.Raw) error {
		// Not matched: newer, or changed since (retry).
		if v, err := r.versionOf(raw); err == nil && v > r.current {
			return r.newer(v)
		}
		return nil
	})
}

// guarded runs write, a write filtered on the document id and its version,
// until it matches. After each miss it reads the document (ErrNotFound if
// it is gone) and lets onMiss decide: an error stops, nil retries, up to
// maxAttempts writes in all, then ErrConflict.
func (r *Repo[T]) guarded(ctx context.Context, id any, write func() (bool, error), onMiss func(raw bson.Raw) error) error {
	for range maxAttempts {
		matched, err := write()
		if err != nil || matched {
			return err
		}
		raw, err := r.findRaw(ctx, id)
		if err != nil {
			return err
		}
		if err := onMiss(raw); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: the document kept changing (%d attempts)", patterns.ErrConflict, maxAttempts)
}

// Delete deletes the document id, whatever its version. One command
// (delete); [patterns.ErrNotFound] when there is none.
func (r *Repo[T]) Delete(ctx context.Context, id any) error {
	if err := patterns.ValidateID(id); err != nil {
		return r.errorf("Delete", id, err)
	}
	res, err := r.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err == nil && res.DeletedCount == 0 {
		err = patterns.ErrNotFound
	}
	if err != nil {
		return r.errorf("Delete", id, err)
	}
	return nil
}

// merged applies driver options to see what they ask for, as the driver
// will; an option that fails to apply is ErrInvalid.
func merged[O any](opts []options.Lister[O]) (O, error) {
	var o O
	for _, l := range opts {
		for _, set := range l.List() {
			if err := set(&o); err != nil {
				return o, fmt.Errorf("%w: options: %v", patterns.ErrInvalid, err)
			}
		}
	}
	return o, nil
}

// findRaw reads the document id as stored.
func (r *Repo[T]) findRaw(ctx context.Context, id any) (bson.Raw, error) {
	raw, err := r.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, patterns.ErrNotFound
	}
	return raw, err
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
		if won || attempt == maxAttempts {
			return t, nil
		}
		if raw, err = r.findRaw(ctx, raw.Lookup("_id")); err != nil {
			var zero T
			return zero, err
		}
	}
}

// writeBackDoc replaces the stored document old with migrated if nobody
// wrote it since it was read, and reports whether it did.
func (r *Repo[T]) writeBackDoc(ctx context.Context, old, migrated bson.Raw) (bool, error) {
	res, err := r.coll.ReplaceOne(ctx, r.casFilter(old), migrated)
	if err != nil {
		return false, fmt.Errorf("write back the migrated document: %w", err)
	}
	return res.MatchedCount == 1, nil
}

// errorf says where an error happened: the collection, the operation and
// the document id when there is one.
func (r *Repo[T]) errorf(op string, id any, err error) error {
	if id == nil {
		return fmt.Errorf("versioning: %s: %s: %w", r.coll.Name(), op, err)
	}
	return fmt.Errorf("versioning: %s: %s %v: %w", r.coll.Name(), op, id, err)
}
