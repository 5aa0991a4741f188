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

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Store is what a service needs of an outlier repository: depend on it and
// substitute it in the service's own unit tests. [*Repo] implements it.
type Store[P, I any] interface {
	Insert(ctx context.Context, parent P) (any, error)
	Append(ctx context.Context, parentID any, items ...I) error
	Get(ctx context.Context, parentID any) (P, []I, error)
	Items(ctx context.Context, parentID any) iter.Seq2[I, error]
	Page(ctx context.Context, parentID any, after Cursor, limit int) ([]I, Cursor, error)
	Count(ctx context.Context, parentID any) (int, error)
	Update(ctx context.Context, parentID any, item I) error
	Remove(ctx context.Context, parentID, itemID any) error
	Delete(ctx context.Context, parentID any) error
	// Indexes returns the indexes the store's queries need, for
	// [patterns.EnsureIndexes].
	Indexes() []patterns.Index
}

var _ Store[bson.Raw, bson.Raw] = (*Repo[bson.Raw, bson.Raw])(nil)

// Repo stores parents of type P whose items of type I are embedded up to
// Config.Cap and overflow into documents of Config.OverflowCap items.
// It is safe for concurrent use by several goroutines, and by several
// processes each with its own Repo (on FerretDB 1.x, only through one
// client with one connection: see [patterns.FeatureConcurrentUpdates]).
//
// Before the first [Repo.Append] that overflows, the indexes of
// [Repo.Indexes] must exist: Append checks once that the unique index on
// {parent, seq} does and refuses to overflow without it, since without it
// concurrent appenders could create two documents with one seq.
type Repo[P, I any] struct {
	cfg         Config
	parents     *mongo.Collection
	overflow    *mongo.Collection
	idPath      string // Field.IDField: the item ids in the parent
	itemsIDPath string // items.IDField: the item ids in overflow documents
	setByID     string // Field.$[e], and
	byIDFilter  string // e.IDField: the element an arrayFilters update sets by id

	embedded []int    // P's field of the embedded items (see embeddedField); nil: none
	paths    []string // see elementPaths

	planned     lazy.Value[plan] // the server's path, decided on first use
	collections []string         // Parents and Overflow, for the Hook
	indexed     atomic.Bool      // the unique {parent, seq} index was seen
	// appending runs one Update or batch of Appends (see queued) per
	// parent at a time where pushes into the parent are guarded on the
	// exact number of items read (without plan.serverSizeLimit), so that
	// the repository's own callers do not make each other's pushes miss.
	appending parentLocks
	// queued runs the repository's Appends to one parent one batch at a
	// time, so that its own callers do not make each other's guarded
	// writes miss (see appendQueues).
	queued appendQueues
}

// lockParent takes the parent's lock in appending where the plan guards
// pushes on the exact number of items read (without
// plan.serverSizeLimit), and returns the key and the lock to give to
// appending.unlock; elsewhere it takes nothing and returns a nil lock.
func (r *Repo[P, I]) lockParent(ctx context.Context, p plan, parentID bson.RawValue) (string, *parentLock, error) {
	if p.serverSizeLimit {
		return "", nil, nil
	}
	key := bsonid.Key(parentID)
	held, err := r.appending.lock(ctx, key)
	return key, held, err
}

// New returns a repository for cfg in db. It validates cfg (wrapping
// [patterns.ErrInvalid]) and checks that I encodes as a BSON document; it
// sends nothing. The server is asked what it is on first use, once per
// client (see [patterns.Capabilities]).
func New[P, I any](db *mongo.Database, cfg Config) (*Repo[P, I], error) {
	if db == nil {
		return nil, pkg.Wrap("New", errs.Invalid("nil database"))
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, pkg.Wrap("New", err)
	}
	if err := encodesAsDocument[I](); err != nil {
		return nil, pkg.Wrap("New", err)
	}
	return &Repo[P, I]{
		cfg:         cfg,
		parents:     db.Collection(cfg.Parents),
		overflow:    db.Collection(cfg.Overflow),
		idPath:      cfg.Field + "." + cfg.IDField,
		itemsIDPath: fItems + "." + cfg.IDField,
		setByID:     cfg.Field + ".$[e]",
		byIDFilter:  "e." + cfg.IDField,
		embedded:    embeddedField[P, I](cfg.Field),
		paths:       elementPaths(cfg),
		collections: []string{cfg.Parents, cfg.Overflow},
	}, nil
}

// start starts the operation name for the repository's Hook: the
// context its commands use, and the operation to report to (nil, with
// ctx itself, when there is no Hook).
func (r *Repo[P, I]) start(ctx context.Context, name string) (context.Context, *patterns.Operation) {
	return obs.Start(ctx, r.cfg.Hook, &r.planned, string(pkg), name, r.parents.Database().Name(), r.collections)
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

// Config returns the configuration in use, defaults filled in. It sends
// nothing; the configuration never changes after [New].
func (r *Repo[P, I]) Config() Config { return r.cfg }

// Indexes returns the indexes the repository's operations need, all on
// the overflow collection (the parent is always found by _id):
//   - {parent: 1, seq: 1}, unique: reads in append order, finding the
//     newest document, and the guard that makes concurrent appenders agree
//     on each document (Append refuses to overflow without it);
//   - {parent: 1, items.<IDField>: 1}: the id lookup that makes Append
//     retry-safe and lets Remove find an item. It is multikey: one index
//     entry per overflowed item, the storage price of both.
//
// It sends nothing: create them with [patterns.EnsureIndexes] before the
// first write.
func (r *Repo[P, I]) Indexes() []patterns.Index {
	return []patterns.Index{
		{Collection: r.overflow, Model: mongo.IndexModel{
			Keys:    seqIndexKeys(),
			Options: options.Index().SetUnique(true),
		}},
		{Collection: r.overflow, Model: mongo.IndexModel{
			Keys: r.itemIndexKeys(),
		}},
	}
}

// plan returns the repository's path, deciding it on first use from the
// server's features ([patterns.Capabilities] caches them per client). A
// failed detection is not kept.
func (r *Repo[P, I]) plan(ctx context.Context) (plan, error) {
	return lazy.Decide(ctx, &r.planned, r.parents.Database().Client(), planFor)
}

// checkIndexed returns an error wrapping [patterns.ErrInvalid] unless the
// overflow collection has the unique {parent: 1, seq: 1} index. It sends
// one listIndexes until a check succeeds (concurrent first callers each
// send theirs) and nothing afterwards.
func (r *Repo[P, I]) checkIndexed(ctx context.Context) error {
	if r.indexed.Load() {
		return nil
	}
	patterns.OperationFrom(ctx).Sent(1)
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

// updateOne sends an update, again after a transient failure (FerretDB
// 2.x's deadlock, which applied nothing; see [srverr.Retry]). Every update
// of the repository is safe to send again: each is guarded by what it
// changes (the pushes by the item ids or the room left, the removals by
// the item's presence) or idempotent (the close, the new array). It
// counts each command sent, and the documents written, in the operation
// of ctx.
func updateOne(ctx context.Context, coll *mongo.Collection, filter bson.D, update any, opts ...options.Lister[options.UpdateOneOptions]) (res *mongo.UpdateResult, err error) {
	op := patterns.OperationFrom(ctx)
	err = srverr.Retry(ctx, func() (err error) {
		op.Sent(1)
		res, err = coll.UpdateOne(ctx, filter, update, opts...)
		return err
	})
	if err == nil {
		op.Affected(res.ModifiedCount + res.UpsertedCount)
	}
	return res, err
}

// findParent reads the parent, with the projection if any; a missing
// parent is [patterns.ErrNotFound].
func (r *Repo[P, I]) findParent(ctx context.Context, parentID any, projection bson.D) (bson.Raw, error) {
	var res *mongo.SingleResult
	patterns.OperationFrom(ctx).Sent(1)
	if projection == nil {
		res = r.parents.FindOne(ctx, parentFilter(parentID))
	} else {
		res = r.parents.FindOne(ctx, parentFilter(parentID), options.FindOne().SetProjection(projection))
	}
	raw, err := res.Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, errNoParent
	}
	return raw, err
}

// errNoParent is the error of an operation on a parent that does not
// exist.
var errNoParent = fmt.Errorf("no such parent: %w", patterns.ErrNotFound)

// fail returns the error of operation op on the parent, in the package's
// format ("outlier: Append: parent 7: no such parent: not found"), with
// the server's error classified (see [srverr.Classify]); nil stays nil.
func fail(op string, parentID any, err error) error {
	if err == nil {
		return nil
	}
	return pkg.Wrap(op, fmt.Errorf("parent %s: %w", bsonid.Text(parentID), srverr.Classify(err)))
}

// validParent validates a parent id given at the API.
func validParent(op string, parentID any) error {
	if err := patterns.ValidateID(parentID); err != nil {
		return pkg.Wrap(op, fmt.Errorf("parent id: %w", err))
	}
	return nil
}
