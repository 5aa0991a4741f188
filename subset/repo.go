package subset

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/esr"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Store is what an application calls on a subset repository; [*Repo]
// implements it. A service depends on Store so that its own unit tests can
// substitute it.
type Store[P, I any] interface {
	Get(ctx context.Context, parentID any, opts ...options.Lister[options.FindOneOptions]) (P, error)
	Count(ctx context.Context, parentID any) (int64, error)
	Item(ctx context.Context, parentID, itemID any) (I, error)
	Add(ctx context.Context, parentID any, items ...I) error
	Update(ctx context.Context, parentID any, item I) error
	Remove(ctx context.Context, parentID, itemID any) error
	All(ctx context.Context, parentID any, opts ...options.Lister[options.FindOptions]) iter.Seq2[I, error]
	Page(ctx context.Context, parentID any, after Cursor, limit int) ([]I, Cursor, error)
	Rebuild(ctx context.Context, parentID any) error
	Delete(ctx context.Context, parentID any) error
	// Indexes returns the indexes the store's queries need, for
	// [patterns.EnsureIndexes].
	Indexes() []patterns.Index
}

var _ Store[struct{}, struct{}] = (*Repo[struct{}, struct{}])(nil)

// Repo keeps, in each parent document of type P, the Cap most relevant of
// the parent's items of type I, while every item lives in its own
// collection. It is safe for concurrent use, by several goroutines and by
// several processes (on FerretDB 1.x only through one client with one
// connection: see [patterns.FeatureConcurrentUpdates]). Build it with
// [New].
type Repo[P, I any] struct {
	parents, items *mongo.Collection
	cfg            Config
	cmd            commands
	sortPath       []string // cfg.SortField split at the dots
	itemBudget     int      // see itemBudget
	planned        lazy.Value[plan]
	collections    []string // Parents and Items, for the Hook
	insertBatch    int      // the bytes of an insert batch: insertBatchBytes, but in tests
}

// New returns a repository over the collections cfg names in db. It
// validates cfg (every error wraps [patterns.ErrInvalid]) and sends
// nothing: the path is chosen from [patterns.Capabilities] on first use,
// once per repository (two commands, once per client). Create the indexes
// of [Repo.Indexes] before the first write.
func New[P, I any](db *mongo.Database, cfg Config) (*Repo[P, I], error) {
	if db == nil {
		return nil, pkg.Wrap("New", errs.Invalid("nil database"))
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, pkg.Wrap("New", err)
	}
	return &Repo[P, I]{
		parents:     db.Collection(cfg.Parents),
		items:       db.Collection(cfg.Items),
		cfg:         cfg,
		cmd:         newCommands(cfg),
		sortPath:    strings.Split(cfg.SortField, "."),
		itemBudget:  itemBudget(cfg),
		collections: []string{cfg.Parents, cfg.Items},
		insertBatch: insertBatchBytes,
	}, nil
}

// start starts the operation name for the repository's Hook: the
// context its commands use, and the operation to report to (nil, with
// ctx itself, when there is no Hook).
func (r *Repo[P, I]) start(ctx context.Context, name string) (context.Context, *patterns.Operation) {
	return obs.Start(ctx, r.cfg.Hook, &r.planned, string(pkg), name, r.parents.Database().Name(), r.collections)
}

// plan returns the repository's plan: on the first call it asks
// [patterns.Capabilities] (cached per client); later calls read it.
func (r *Repo[P, I]) plan(ctx context.Context) (plan, error) {
	return lazy.Decide(ctx, &r.planned, r.parents.Database().Client(), planFor)
}

// fail is the error an exported method returns: "subset: <op>: <err>",
// with a server's error classified (so that errors.Is finds
// patterns.ErrTooLarge or patterns.ErrUnsupported on every server).
func fail(op string, err error) error { return pkg.Wrap(op, srverr.Classify(err)) }

// write sends a write that is safe to repeat, again after a transient
// failure ([srverr.Retry]), and classifies its error. It counts each
// command sent, and the documents the write reports written, in the
// operation of ctx.
func write[T any](ctx context.Context, send func() (T, error)) (T, error) {
	op := patterns.OperationFrom(ctx)
	var res T
	err := srverr.Retry(ctx, func() error {
		var err error
		op.Sent(1)
		res, err = send()
		return err
	})
	if op != nil && err == nil {
		switch r := any(res).(type) {
		case *mongo.UpdateResult:
			op.Affected(r.ModifiedCount + r.UpsertedCount)
		case *mongo.DeleteResult:
			op.Affected(r.DeletedCount)
		}
	}
	return res, srverr.Classify(err)
}

// Indexes returns the indexes the repository's queries need, for
// [patterns.EnsureIndexes]: on the items collection, {ParentField: 1,
// SortField: d, IDField: d} (d is -1 when Descending), which serves the
// recomputation of the subset, [Repo.All] and [Repo.Page] in order without
// a sort in memory; and, when IDField is not _id, a unique {ParentField: 1,
// IDField: 1}, which is what makes a retried [Repo.Add] store an item
// once. The parents need only their _id index.
func (r *Repo[P, I]) Indexes() []patterns.Index {
	dir := r.cmd.order[0].Value.(int)
	key, _ := esr.Key( // the fields were validated by New
		esr.Equality(r.cfg.ParentField),
		esr.Sort(r.cfg.SortField, dir),
		esr.Sort(r.cfg.IDField, dir),
	)
	out := []patterns.Index{{Collection: r.items, Model: mongo.IndexModel{Keys: key}}}
	if r.cfg.IDField != DefaultIDField {
		out = append(out, patterns.Index{Collection: r.items, Model: mongo.IndexModel{
			Keys:    bson.D{{Key: r.cfg.ParentField, Value: 1}, {Key: r.cfg.IDField, Value: 1}},
			Options: options.Index().SetUnique(true),
		}})
	}
	return out
}

// Get returns the parent with its subset: one findOne on the parents,
// served by _id, on every server. opts pass through to the driver (a
// projection, for example). A missing parent gives [patterns.ErrNotFound].
//
// The subset it returns is one atomic snapshot of the parent document. It
// may lag the items collection by the writes in flight: an item that
// [Repo.Add] has stored but not yet put in the subset, or one that
// [Repo.Remove] has deleted but not yet taken out; and no more than that.
func (r *Repo[P, I]) Get(ctx context.Context, parentID any, opts ...options.Lister[options.FindOneOptions]) (_ P, err error) {
	ctx, op := r.start(ctx, "Get")
	defer op.Finish(&err)
	var p P
	if err := txn.Refuse(ctx); err != nil {
		return p, fail("Get", err)
	}
	if err := patterns.ValidateID(parentID); err != nil {
		return p, fail("Get", fmt.Errorf("parent id: %w", err))
	}
	op.Sent(1)
	err = r.parents.FindOne(ctx, r.cmd.parent(parentID), opts...).Decode(&p)
	if errors.Is(err, mongo.ErrNoDocuments) {
		err = errNoParent
	}
	if err != nil {
		var zero P
		return zero, fail("Get", fmt.Errorf("parent %s: %w", idOf(parentID), err))
	}
	return p, nil
}

// errNoParent is what an operation on a missing parent returns, after
// the parent's id.
var errNoParent = fmt.Errorf("no such parent: %w", patterns.ErrNotFound)

// idOf writes an id given at the API, valid, for an error message.
func idOf(id any) string {
	t, v, err := bson.MarshalValue(id)
	if err != nil {
		return fmt.Sprint(id)
	}
	return bsonid.Text(bson.RawValue{Type: t, Value: v})
}

// Delete deletes the parent, then all its items: two commands, each
// retried after a transient failure (FerretDB 2.x's "deadlock
// detected"). A reader between them sees no parent while its items
// remain, and then no items. Deleting the parent first is what keeps
// concurrent writers from leaving orphans: a [Repo.Add] that stored its
// items before the parent was gone either had them deleted by the second
// step or finds the parent missing and deletes them itself. It is safe to
// retry; it returns [patterns.ErrNotFound] when there was neither a
// parent nor an item (so a retry after a call that did the whole job but
// lost its reply reports ErrNotFound). The items that an Add in flight
// stored after the parent was deleted, which go with the parent when it
// returns (see [Repo.Add]), count as items: a Delete that finds them
// deletes them and returns nil, the parent already gone. The items carry
// no incarnation of their parent: a parent created again while its
// Delete is in flight, between its two commands, loses the items stored
// under it meanwhile (an Add's that returned nil too, whose push may then
// leave in the new subset an item stored nowhere, until a Rebuild),
// and until then the deleted parent's items are the new parent's: a
// Remove or an Update may find one and return nil, and a recomputation
// may put them in the new subset. Create a parent again once its Delete
// has returned.
//
// A delete of the parent that matched nothing is checked with a find of
// its _id, one more command, and sent again while the parent is there
// (FerretDB 2.x answers no match for a document that a concurrent update
// is rewriting, and leaves it); after 5 such answers Delete returns
// [patterns.ErrConflict] with the parent and its items in place.
func (r *Repo[P, I]) Delete(ctx context.Context, parentID any) (err error) {
	ctx, op := r.start(ctx, "Delete")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return fail("Delete", err)
	}
	if err := patterns.ValidateID(parentID); err != nil {
		return fail("Delete", fmt.Errorf("parent id: %w", err))
	}
	deleted, err := srverr.DeleteOne(ctx, r.parents, r.cmd.parent(parentID))
	if err != nil {
		return fail("Delete", fmt.Errorf("parent %s: %w", idOf(parentID), err))
	}
	if deleted {
		op.Affected(1)
	}
	i, err := write(ctx, func() (*mongo.DeleteResult, error) { return r.items.DeleteMany(ctx, r.cmd.items(parentID)) })
	if err != nil {
		return fail("Delete", fmt.Errorf("parent %s: delete its items: %w", idOf(parentID), err))
	}
	if !deleted && i.DeletedCount == 0 {
		return fail("Delete", fmt.Errorf("parent %s: no such parent and no items: %w", idOf(parentID), patterns.ErrNotFound))
	}
	return nil
}
