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

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/esr"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Store is what an application calls on a subset repository; [*Repo]
// implements it. A service depends on Store so that its own unit tests can
// substitute it.
type Store[P, I any] interface {
	Get(ctx context.Context, parentID any, opts ...options.Lister[options.FindOneOptions]) (P, error)
	Add(ctx context.Context, parentID any, items ...I) error
	Update(ctx context.Context, parentID any, item I) error
	Remove(ctx context.Context, parentID, itemID any) error
	All(ctx context.Context, parentID any, opts ...options.Lister[options.FindOptions]) iter.Seq2[I, error]
	Page(ctx context.Context, parentID any, after Cursor, limit int) ([]I, Cursor, error)
	Rebuild(ctx context.Context, parentID any) error
	Delete(ctx context.Context, parentID any) error
}

var _ Store[struct{}, struct{}] = (*Repo[struct{}, struct{}])(nil)

// Repo keeps, in each parent document of type P, the Cap most relevant of
// the parent's items of type I, while every item lives in its own
// collection. It is safe for concurrent use. Build it with [New].
type Repo[P, I any] struct {
	parents, items *mongo.Collection
	cfg            Config
	sortPath       []string         // cfg.SortField split at the dots
	idPath         string           // the ids in the subset: Field.IDField
	order          bson.D           // {SortField: dir, IDField: dir}, everywhere
	path           lazy.Value[bool] // true: the native path (see the package documentation)
}

// New returns a repository over the collections cfg names in db. It
// validates cfg (every error wraps [patterns.ErrInvalid]) and sends
// nothing: the path (native or portable) is chosen from
// [patterns.Capabilities] on first use, once. Create the indexes of
// [Repo.Indexes] before the first write.
func New[P, I any](db *mongo.Database, cfg Config) (*Repo[P, I], error) {
	if db == nil {
		return nil, fmt.Errorf("subset: New: %w", errs.Invalid("nil database"))
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, fmt.Errorf("subset: New: %w", err)
	}
	dir := 1
	if cfg.Descending {
		dir = -1
	}
	return &Repo[P, I]{
		parents:  db.Collection(cfg.Parents),
		items:    db.Collection(cfg.Items),
		cfg:      cfg,
		sortPath: strings.Split(cfg.SortField, "."),
		idPath:   cfg.Field + "." + cfg.IDField,
		order:    bson.D{{Key: cfg.SortField, Value: dir}, {Key: cfg.IDField, Value: dir}},
	}, nil
}

// native reports whether the repository takes the native path: whether
// the server applies the $push modifiers $sort and $slice. The first call
// asks [patterns.Capabilities] (cached per client); later calls read the
// decision.
func (r *Repo[P, I]) native(ctx context.Context) (bool, error) {
	return r.path.Get(ctx, func(ctx context.Context) (bool, error) {
		srv, err := patterns.Capabilities(ctx, r.parents.Database().Client())
		if err != nil {
			return false, err
		}
		return srv.Has(patterns.FeaturePushModifiers), nil
	})
}

// Indexes returns the indexes the repository's queries need, for
// [patterns.EnsureIndexes]: on the items collection, {ParentField: 1,
// SortField: d, IDField: d} (d is -1 when Descending), which serves the
// recomputation of the subset, [Repo.All] and [Repo.Page] in order without
// a sort in memory; and, when IDField is not _id, a unique {ParentField: 1,
// IDField: 1}, which is what makes a retried [Repo.Add] store an item
// once. The parents need only their _id index.
func (r *Repo[P, I]) Indexes() []patterns.Index {
	dir := r.order[0].Value.(int)
	key, _ := esr.Key( // the fields were validated by New
		esr.Equality(r.cfg.ParentField),
		esr.Sort(r.cfg.SortField, dir),
		esr.Sort(r.cfg.IDField, dir),
	)
	out := []patterns.Index{{Collection: r.items, Model: mongo.IndexModel{Keys: key}}}
	if r.cfg.IDField != "_id" {
		out = append(out, patterns.Index{Collection: r.items, Model: mongo.IndexModel{
			Keys:    bson.D{{Key: r.cfg.ParentField, Value: 1}, {Key: r.cfg.IDField, Value: 1}},
			Options: options.Index().SetUnique(true),
		}})
	}
	return out
}

// Get returns the parent with its subset: one findOne on the parents,
// served by _id. opts pass through to the driver (a projection, for
// example). A missing parent gives [patterns.ErrNotFound].
//
// The subset it returns is one atomic snapshot of the parent document. It
// may lag the items collection by the writes in flight: an item that
// [Repo.Add] has stored but not yet put in the subset, or one that
// [Repo.Remove] has deleted but not yet taken out.
func (r *Repo[P, I]) Get(ctx context.Context, parentID any, opts ...options.Lister[options.FindOneOptions]) (P, error) {
	var zero P
	if err := patterns.ValidateID(parentID); err != nil {
		return zero, fmt.Errorf("subset: Get: parent id: %w", err)
	}
	var p P
	err := r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: parentID}}, opts...).Decode(&p)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return zero, fmt.Errorf("subset: Get: parent %v: %w", parentID, patterns.ErrNotFound)
	}
	if err != nil {
		return zero, fmt.Errorf("subset: Get: parent %v: %w", parentID, err)
	}
	return p, nil
}

// Delete deletes the parent, then all its items: two commands. A reader
// between them sees no parent while its items remain, and then no items.
// Deleting the parent first is what keeps concurrent writers from leaving
// orphans: a [Repo.Add] that stored its items before the parent was gone
// either had them deleted by the second step or finds the parent missing
// and deletes them itself. It is safe to retry; it returns
// [patterns.ErrNotFound] when there was neither a parent nor an item.
func (r *Repo[P, I]) Delete(ctx context.Context, parentID any) error {
	if err := patterns.ValidateID(parentID); err != nil {
		return fmt.Errorf("subset: Delete: parent id: %w", err)
	}
	p, err := r.parents.DeleteOne(ctx, bson.D{{Key: "_id", Value: parentID}})
	if err != nil {
		return fmt.Errorf("subset: Delete: parent %v: %w", parentID, err)
	}
	i, err := r.items.DeleteMany(ctx, bson.D{{Key: r.cfg.ParentField, Value: parentID}})
	if err != nil {
		return fmt.Errorf("subset: Delete: items of parent %v: %w", parentID, err)
	}
	if p.DeletedCount == 0 && i.DeletedCount == 0 {
		return fmt.Errorf("subset: Delete: parent %v: %w", parentID, patterns.ErrNotFound)
	}
	return nil
}
