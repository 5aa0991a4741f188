package outlier

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Store is what a service needs of an outlier repository: depend on it and
// substitute it in the service's own unit tests. [*Repo] implements it.
type Store[P, I any] interface {
	Insert(ctx context.Context, parent P) (any, error)
	Append(ctx context.Context, parentID any, items ...I) error
	Get(ctx context.Context, parentID any) (P, []I, error)
	Items(ctx context.Context, parentID any) iter.Seq2[I, error]
	Count(ctx context.Context, parentID any) (int, error)
	Remove(ctx context.Context, parentID, itemID any) error
	Delete(ctx context.Context, parentID any) error
}

var _ Store[bson.Raw, bson.Raw] = (*Repo[bson.Raw, bson.Raw])(nil)

// Repo stores parents of type P whose items of type I are embedded up to
// Config.Threshold and overflow into documents of Config.PerOverflow items.
// It is safe for concurrent use.
//
// Before the first [Repo.Append] that overflows, the indexes of
// [Repo.Indexes] must exist: Append checks once that the unique index on
// {parent, seq} does and refuses to overflow without it, since without it
// concurrent appenders could create two documents with one seq.
type Repo[P, I any] struct {
	cfg         Config
	parents     *mongo.Collection
	overflow    *mongo.Collection
	idPath      string // Field.ItemID: the item ids in the parent
	itemsIDPath string // items.ItemID: the item ids in overflow documents

	mode    lazy.Value[int32] // a path, chosen once
	indexed atomic.Bool       // the unique {parent, seq} index was seen
}

// The paths a repository can take, chosen once from the server (see
// [Repo.Append] and [Repo.Remove]).
const (
	// modeNative: MongoDB. Parent pushes are optimistic (the server
	// refuses a document over 16 MiB, atomically) and Remove uses $pull
	// with a condition.
	modeNative int32 = iota + 1
	// modePortable: FerretDB and unrecognised servers. FerretDB 1.x stores
	// documents over 16 MiB on update and reads a $pull condition as an
	// exact element, both silently, so Append reads the parent to size the
	// push and Remove reads the element to pull it whole.
	modePortable
)

// New returns a repository for cfg in db. It validates cfg (wrapping
// [patterns.ErrInvalid]) and checks that I encodes as a BSON document; it
// sends nothing. The server is asked what it is on first use, once (see
// [patterns.Capabilities]).
func New[P, I any](db *mongo.Database, cfg Config) (*Repo[P, I], error) {
	if db == nil {
		return nil, errs.Invalid("outlier.New: nil database")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := encodesAsDocument[I](); err != nil {
		return nil, fmt.Errorf("outlier.New: %w", err)
	}
	return &Repo[P, I]{
		cfg:         cfg,
		parents:     db.Collection(cfg.Parent),
		overflow:    db.Collection(cfg.Overflow),
		idPath:      cfg.Field + "." + cfg.ItemID,
		itemsIDPath: fItems + "." + cfg.ItemID,
	}, nil
}

// encodesAsDocument checks that values of type T (or what they point to)
// encode as BSON documents, as items must.
func encodesAsDocument[T any]() error {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[bson.Raw]() {
		return nil
	}
	if _, err := bson.Marshal(reflect.New(t).Elem().Interface()); err != nil {
		return errs.Invalid("item type %s does not encode as a BSON document: %v", t, err)
	}
	return nil
}

// Config returns the configuration in use, defaults filled in.
func (r *Repo[P, I]) Config() Config { return r.cfg }

// Indexes returns the indexes the repository's operations need, all on
// the overflow collection (the parent is always found by _id):
//   - {parent: 1, seq: 1}, unique: reads in append order, finding the
//     newest document, and the guard that makes concurrent appenders agree
//     on each document (Append refuses to overflow without it);
//   - {parent: 1, items.<ItemID>: 1}: the id lookup that makes Append
//     retry-safe and lets Remove find an item. It is multikey: one index
//     entry per overflowed item, the storage price of both.
//
// Create them with [patterns.EnsureIndexes] before the first write.
func (r *Repo[P, I]) Indexes() []patterns.Index {
	return []patterns.Index{
		{Collection: r.overflow, Model: mongo.IndexModel{
			Keys:    d(fParent, 1, fSeq, 1),
			Options: options.Index().SetUnique(true),
		}},
		{Collection: r.overflow, Model: mongo.IndexModel{
			Keys: d(fParent, 1, r.itemsIDPath, 1),
		}},
	}
}

// native reports whether the repository takes the native path, asking the
// server on first use ([patterns.Capabilities] caches the answer per
// client). A failed detection is not remembered.
func (r *Repo[P, I]) native(ctx context.Context) (bool, error) {
	m, err := r.mode.Get(ctx, func(ctx context.Context) (int32, error) {
		srv, err := patterns.Capabilities(ctx, r.parents.Database().Client())
		if err != nil {
			return 0, err
		}
		if srv.Has(patterns.FeaturePullConditions) && srv.Has(patterns.FeatureUpdateSizeLimit) {
			return modeNative, nil
		}
		return modePortable, nil
	})
	return m == modeNative, err
}

// checkIndexed returns an error wrapping [patterns.ErrInvalid] unless the
// overflow collection has the unique {parent: 1, seq: 1} index. It sends
// one listIndexes until a check succeeds (concurrent first callers each
// send theirs) and nothing afterwards.
func (r *Repo[P, I]) checkIndexed(ctx context.Context) error {
	if r.indexed.Load() {
		return nil
	}
	specs, err := r.overflow.Indexes().ListSpecifications(ctx)
	if err != nil {
		return fmt.Errorf("list the indexes of %s: %w", r.overflow.Name(), err)
	}
	want := r.Indexes()[0].Model.Keys.(bson.D)
	for _, s := range specs {
		if s.Unique != nil && *s.Unique && sameKey(s.KeysDocument, want) {
			r.indexed.Store(true)
			return nil
		}
	}
	return errs.Invalid("collection %s lacks the unique index {%s: 1, %s: 1} that keeps concurrent appenders from writing two overflow documents with one seq; create it with patterns.EnsureIndexes(ctx, repo.Indexes()...)",
		r.overflow.Name(), fParent, fSeq)
}

// sameKey reports whether an index key as listed by the server is want.
func sameKey(got bson.Raw, want bson.D) bool {
	elems, err := got.Elements()
	if err != nil || len(elems) != len(want) {
		return false
	}
	for i, e := range elems {
		n, ok := e.Value().AsInt64OK()
		if !ok || e.Key() != want[i].Key || n != int64(want[i].Value.(int)) {
			return false
		}
	}
	return true
}

// findParent reads the parent, with the projection if any; a missing
// parent is [patterns.ErrNotFound].
func (r *Repo[P, I]) findParent(ctx context.Context, parentID any, projection bson.D) (bson.Raw, error) {
	opts := options.FindOne()
	if projection != nil {
		opts.SetProjection(projection)
	}
	raw, err := r.parents.FindOne(ctx, d("_id", parentID), opts).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("%w: no parent with _id %v in %s", patterns.ErrNotFound, parentID, r.parents.Name())
	}
	return raw, err
}

// wrap says which operation on which parent failed; nil stays nil.
func (r *Repo[P, I]) wrap(op string, parentID any, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outlier.%s: parent %v: %w", op, parentID, err)
}

// pid validates a parent id at the API.
func pid(op string, parentID any) error {
	if err := patterns.ValidateID(parentID); err != nil {
		return fmt.Errorf("outlier.%s: parent id: %w", op, err)
	}
	return nil
}
