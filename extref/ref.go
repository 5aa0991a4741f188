package extref

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Config declares one extended reference. The copied fields are not listed
// here: they are the fields of the copy type S given to [New].
type Config struct {
	// Source is the collection of the referenced documents (required).
	Source string
	// IDField is the BSON name of the copy's field that holds the source's
	// _id. Zero value: "id".
	IDField string
	// Targets are the places that hold copies (at least one). Two targets
	// of one collection must not overlap (one path inside the other).
	Targets []Target
	// BatchSize is how many documents Verify and Repair read per round trip
	// and how many documents the portable array path reads and rewrites per
	// round trip. Zero value: 500.
	BatchSize int
}

// DefaultBatchSize is the [Config.BatchSize] used when it is zero.
const DefaultBatchSize = 500

// Store is what an application calls on an extended reference: take a copy
// to embed, and keep the copies in sync when the source changes. [*Ref]
// implements it; a service can depend on Store and substitute it in its
// own unit tests.
type Store[S any] interface {
	Of(ctx context.Context, sourceID any) (S, error)
	Sync(ctx context.Context, sourceID any) ([]Count, error)
	Update(ctx context.Context, sourceID, update any, opts ...options.Lister[options.FindOneAndUpdateOptions]) ([]Count, error)
}

var _ Store[struct{ ID int }] = (*Ref[struct{ ID int }])(nil)

// Ref is one extended reference: the documents of a source collection,
// copied as S into the documents of one or more targets. It is safe for
// concurrent use.
type Ref[S any] struct {
	db      *mongo.Database
	source  *mongo.Collection
	ct      copyType
	targets []target
	batch   int
	proj    bson.D // projection of a source document on the copied fields

	mode lazy.Value[*mode] // the server's paths, detected on first use
	// afterScan, when set (by tests), runs in the portable array path
	// between reading a batch of documents and writing it, so that a test
	// can move array elements in that window.
	afterScan func(ctx context.Context)
}

// target is a configured [Target] with its collection and parsed path.
type target struct {
	Target
	coll *mongo.Collection
	path copyPath
}

// mode is what the repository does on its server, decided once.
type mode struct {
	srv *patterns.Server
	// arrayFilters: array targets sync with one updateMany using
	// arrayFilters; otherwise with the portable path.
	arrayFilters bool
	// transactions: Update runs in a transaction.
	transactions bool
	// projectUpdate: Update's findAndModify returns only the copied fields
	// ([patterns.FeatureFindAndModifyProjection]; FerretDB 1.x answers
	// NotImplemented), else the whole document.
	projectUpdate bool
}

// New declares an extended reference whose copies have type S, a struct
// that holds the source's id (in the field named by [Config.IDField]) and
// the copied fields, named by their BSON tags as the driver encodes them.
//
// New checks everything and returns an error wrapping
// [patterns.ErrInvalid] for: a nil db; a missing source; no targets; an
// invalid or overlapping target path; S that is not a struct, has no id
// field, has no copied field, has an inline map, or encodes itself; a
// negative batch size or one over 2³¹-1. It sends nothing to the server: the server's
// capabilities are detected on first use.
func New[S any](db *mongo.Database, cfg Config) (*Ref[S], error) {
	if db == nil {
		return nil, errs.Invalid("extref.New: nil database")
	}
	if err := check.Collection(cfg.Source); err != nil {
		return nil, fmt.Errorf("extref.New: source: %w", err)
	}
	if cfg.IDField == "" {
		cfg.IDField = "id"
	}
	if err := check.Field(cfg.IDField); err != nil {
		return nil, fmt.Errorf("extref.New: IDField: %w", err)
	}
	switch {
	case cfg.BatchSize == 0:
		cfg.BatchSize = DefaultBatchSize
	case cfg.BatchSize < 0 || cfg.BatchSize > math.MaxInt32:
		return nil, errs.Invalid("extref.New: BatchSize %d is negative or over the server's maximum", cfg.BatchSize)
	}
	ct, err := describe[S](cfg.IDField)
	if err != nil {
		return nil, fmt.Errorf("extref.New: %w", err)
	}
	if len(cfg.Targets) == 0 {
		return nil, errs.Invalid("extref.New: no targets")
	}
	r := &Ref[S]{db: db, source: db.Collection(cfg.Source), ct: ct, batch: cfg.BatchSize}
	for i, t := range cfg.Targets {
		if err := check.Collection(t.Collection); err != nil {
			return nil, fmt.Errorf("extref.New: target %d: %w", i, err)
		}
		p, err := parsePath(t.Path)
		if err != nil {
			return nil, fmt.Errorf("extref.New: target %d (%s): %w", i, t, err)
		}
		for _, o := range r.targets {
			if o.Collection == t.Collection && overlaps(o.path.inDocument(), p.inDocument()) {
				return nil, errs.Invalid("extref.New: targets %s and %s overlap", o.Target, t)
			}
		}
		r.targets = append(r.targets, target{Target: t, coll: db.Collection(t.Collection), path: p})
	}
	for _, f := range ct.fields {
		r.proj = append(r.proj, bson.E{Key: f, Value: 1})
	}
	return r, nil
}

// overlaps reports whether one dotted path is the other or inside it.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// Indexes returns the indexes the repository's queries need: on every
// target, an index on the copy's id ({customer.id: 1}; for an array target
// {items.product.id: 1}, which MongoDB makes multikey). Without them Sync,
// Verify and Repair scan whole target collections. Create them with
// [patterns.EnsureIndexes]. The source needs only its _id index.
func (r *Ref[S]) Indexes() []patterns.Index {
	out := make([]patterns.Index, len(r.targets))
	for i, t := range r.targets {
		out[i] = patterns.Index{Collection: t.coll, Model: mongo.IndexModel{
			Keys: bson.D{{Key: join(t.path.inDocument(), r.ct.id), Value: 1}},
		}}
	}
	return out
}

// detect returns the repository's mode, asking [patterns.Capabilities] on
// first use (two commands to the admin database, once per client). A
// failed detection is not kept, so the next call tries again.
func (r *Ref[S]) detect(ctx context.Context) (*mode, error) {
	return r.mode.Get(ctx, func(ctx context.Context) (*mode, error) {
		srv, err := patterns.Capabilities(ctx, r.db.Client())
		if err != nil {
			return nil, err
		}
		return &mode{
			srv:           srv,
			arrayFilters:  srv.Has(patterns.FeatureArrayFilters),
			transactions:  srv.Has(patterns.FeatureTransactions),
			projectUpdate: srv.Has(patterns.FeatureFindAndModifyProjection),
		}, nil
	})
}

// Of returns the copy of the source document with _id sourceID, to embed
// in a referencing document when it is created. It sends one find with a
// projection on the copied fields.
//
// The copy is a snapshot: if the source changes before the referencing
// document is written, that document holds a stale copy. Sync (or Update)
// after the change fixes only the documents written before it ran; the
// next Sync, Repair or Watch event fixes the others.
//
// Errors: [patterns.ErrInvalid] for a bad id (see [patterns.ValidateID]),
// or when S's id field cannot hold the source's _id exactly (the copies
// could not be found by it); [patterns.ErrNotFound] when no source has that
// id.
func (r *Ref[S]) Of(ctx context.Context, sourceID any) (S, error) {
	var s S
	if err := patterns.ValidateID(sourceID); err != nil {
		return s, fmt.Errorf("extref.Of: %w", err)
	}
	s, _, err := r.load(ctx, sourceID)
	if err != nil {
		return s, fmt.Errorf("extref.Of: %w", err)
	}
	return s, nil
}

// load reads the source and returns its copy, decoded and encoded.
func (r *Ref[S]) load(ctx context.Context, id any) (S, copyValue, error) {
	raw, err := r.source.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(r.proj)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		var zero S
		return zero, copyValue{}, fmt.Errorf("%w: %s has no document with _id %v", patterns.ErrNotFound, r.source.Name(), id)
	}
	if err != nil {
		var zero S
		return zero, copyValue{}, fmt.Errorf("read %s %v: %w", r.source.Name(), id, err)
	}
	return r.copyOf(raw)
}

// copyOf builds the copy of a source document (or of its projection on the
// copied fields): the source's _id goes to the id field, each copied field
// to itself; it decodes that into S and encodes S again, so that the bytes
// are the ones a referencing document holds after embedding the S that Of
// returned. An id field whose Go type changes the _id's value or BSON type
// (numbers of another width excepted) is an error wrapping
// [patterns.ErrInvalid].
func (r *Ref[S]) copyOf(src bson.Raw) (S, copyValue, error) {
	var s S
	d := bson.D{{Key: r.ct.id, Value: src.Lookup("_id")}}
	for _, f := range r.ct.fields {
		if v, err := src.LookupErr(f); err == nil {
			d = append(d, bson.E{Key: f, Value: v})
		}
	}
	b, err := bson.Marshal(d)
	if err == nil {
		err = bson.Unmarshal(b, &s)
	}
	var raw bson.Raw
	if err == nil {
		raw, err = bson.Marshal(s)
	}
	if err != nil {
		return s, copyValue{}, fmt.Errorf("copy %s %v into %s: %w", r.source.Name(), src.Lookup("_id"), r.ct.name, err)
	}
	c := copyValue{raw: raw, id: raw.Lookup(r.ct.id)}
	if id := src.Lookup("_id"); !same(c.id, id) {
		return s, copyValue{}, errs.Invalid("copy type %s stores %s _id %v as %v (BSON %s): the copies could not be found by their source's id; give field %q the _id's type",
			r.ct.name, r.source.Name(), id, c.id, c.id.Type, r.ct.id)
	}
	return s, c, nil
}
