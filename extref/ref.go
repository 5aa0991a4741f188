package extref

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Store is what an application calls on an extended reference: take a copy
// to embed, and keep the copies in sync when the source changes. [*Ref]
// implements it; a service can depend on Store and substitute it in its
// own unit tests.
type Store[S any] interface {
	Of(ctx context.Context, sourceID any) (S, error)
	OfMany(ctx context.Context, sourceIDs []any) ([]S, error)
	Sync(ctx context.Context, sourceID any) ([]Count, error)
	Update(ctx context.Context, sourceID, update any, opts ...options.Lister[options.FindOneAndUpdateOptions]) ([]Count, error)
	// Indexes returns the indexes the store's queries need, for
	// [patterns.EnsureIndexes].
	Indexes() []patterns.Index
}

var _ Store[struct{ ID int }] = (*Ref[struct{ ID int }])(nil)

// Ref is one extended reference: the documents of a source collection,
// copied as S into the documents of one or more targets. It is safe for
// concurrent use by several goroutines and processes, and its methods say
// what concurrent callers see; on FerretDB 1.x only through one client
// with a single connection (see [patterns.FeatureConcurrentUpdates]).
type Ref[S any] struct {
	db      *mongo.Database
	source  *mongo.Collection
	ct      copyType
	targets []target
	batch   int
	txLimit int64  // the most documents Update rewrites in one transaction
	sample  int    // the most copies a Report names per list
	proj    bson.D // projection of a source document on the copied fields
	// findCopy are the options of load's find, built once (a builder is
	// not modified after it is built, so goroutines can share it).
	findCopy *options.FindOneOptionsBuilder
	// shardKey is Config.ShardKey (nil: the source is not sharded on
	// another key), and findKey the options of Update's read of its
	// values.
	shardKey []string
	findKey  *options.FindOneOptionsBuilder

	decided lazy.Value[decision] // the server's plan, decided on first use
	shared  shared               // the syncs under way, by source

	hook        patterns.Hook // Config.Hook
	collections []string      // the source's and the targets' collections, for the hook
}

// target is a configured [Target] with its collection and parsed path.
type target struct {
	Target
	coll  *mongo.Collection
	path  copyPath
	paths targetPaths // the paths its commands name
}

// New declares an extended reference whose copies have type S, a struct
// that holds the source's id (in the field named by [Config.IDField]) and
// the copied fields, named by their BSON tags as the driver encodes them.
//
// New checks everything and returns an error wrapping
// [patterns.ErrInvalid] for: a nil db; a missing source; no targets; an
// invalid or overlapping target path; S that is not a struct, has no id
// field, has no copied field, has an inline map, or encodes itself; a
// negative batch size or one over 2³¹-1; a negative transaction limit or
// report sample; a shard key naming _id, an invalid path or a field
// twice. It sends nothing to the server:
// the server's features are detected on first use.
func New[S any](db *mongo.Database, cfg Config) (*Ref[S], error) {
	if db == nil {
		return nil, pkg.Wrap("New", errs.Invalid("nil database"))
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, pkg.Wrap("New", err)
	}
	ct, err := describe[S](cfg.IDField)
	if err != nil {
		return nil, pkg.Wrap("New", err)
	}
	paths, err := parseTargets(cfg.Targets)
	if err != nil {
		return nil, pkg.Wrap("New", err)
	}
	r := &Ref[S]{db: db, source: db.Collection(cfg.Source, sourceOptions), ct: ct, batch: cfg.BatchSize, txLimit: int64(cfg.TransactionLimit), sample: cfg.ReportSample, proj: fieldsOnly(ct.fields)}
	r.findCopy = options.FindOne().SetProjection(r.proj)
	if len(cfg.ShardKey) > 0 {
		r.shardKey, r.findKey = cfg.ShardKey, options.FindOne().SetProjection(fieldsOnly(cfg.ShardKey))
	}
	r.hook, r.collections = cfg.Hook, []string{cfg.Source}
	for i, t := range cfg.Targets {
		r.targets = append(r.targets, target{Target: t, coll: db.Collection(t.Collection), path: paths[i], paths: pathsOf(paths[i], ct)})
		if !slices.Contains(r.collections, t.Collection) {
			r.collections = append(r.collections, t.Collection)
		}
	}
	return r, nil
}

// start starts the operation name for the repository's hook (see
// [obs.Start]).
func (r *Ref[S]) start(ctx context.Context, name string) (context.Context, *patterns.Operation) {
	return obs.Start(ctx, r.hook, &r.decided, string(pkg), name, r.db.Name(), r.collections)
}

// sourceOptions are the options of the source's collection: it is read
// from the primary whatever the database's read preference, so that a
// Sync never reads a value older than the change it follows (a secondary
// may lag), writes nothing, and leaves the copies stale.
var sourceOptions = options.Collection().SetReadPreference(readpref.Primary())

// Indexes returns the indexes the repository's queries need: on every
// target, an index on the copy's id ({customer.id: 1}; for an array target
// {items.product.id: 1}, which MongoDB makes multikey). Without them Sync
// and Update scan whole target collections. Create them with
// [patterns.EnsureIndexes]. The source needs only its _id index. An
// array target's index carries [patterns.Index.EveryShard]: a shard key
// cannot hold an array, so its Sync goes to every shard under any key.
func (r *Ref[S]) Indexes() []patterns.Index {
	out := make([]patterns.Index, len(r.targets))
	for i, t := range r.targets {
		out[i] = patterns.Index{Collection: t.coll, Model: mongo.IndexModel{Keys: indexKeys(t.path, r.ct)}}
		if t.path.array != "" {
			out[i].EveryShard = "Sync into the array " + t.path.array + " matches copies inside an array, which a shard key cannot hold: every shard under any key"
		}
	}
	return out
}

// Of returns the copy of the source document with _id sourceID, to embed
// in a referencing document when it is created. It sends one find with a
// projection on the copied fields, to the primary (as every read of a
// source: Of, Sync, Update, Watch, Verify and Repair read the source from
// the primary whatever the database's read preference).
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
func (r *Ref[S]) Of(ctx context.Context, sourceID any) (_ S, err error) {
	ctx, op := r.start(ctx, "Of")
	defer op.Finish(&err)
	var zero S
	if err := txn.Refuse(ctx); err != nil {
		return zero, pkg.Wrap("Of", err)
	}
	if err := patterns.ValidateID(sourceID); err != nil {
		return zero, pkg.Wrap("Of", err)
	}
	s, _, err := r.load(ctx, sourceID)
	if err != nil {
		return zero, r.fail("Of", sourceID, err)
	}
	return s, nil
}

// OfMany returns the copies of the source documents with the given ids,
// in the order of the ids (an id given twice gets its copy twice), to
// embed when referencing documents are created: an order of a cart of 20
// products. It sends one find per [Config.BatchSize] distinct ids
// ({_id: {$in: [...]}} with a projection on the copied fields), to the
// primary: one round trip for up to BatchSize sources. The copies are
// snapshots, as [Ref.Of]'s are, read by separate finds when there are
// more than BatchSize ids: no two batches are one snapshot.
//
// Errors: [patterns.ErrInvalid] for a bad id (nothing sent), or as Of
// says for a copy type that cannot hold a source's _id;
// [patterns.ErrNotFound] when some sources do not exist: the error names
// the first 10 missing ids, and the copies of the others are returned all
// the same, with the zero S at each missing id's place.
func (r *Ref[S]) OfMany(ctx context.Context, sourceIDs []any) (_ []S, err error) {
	ctx, op := r.start(ctx, "OfMany")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return nil, pkg.Wrap("OfMany", err)
	}
	for i, id := range sourceIDs {
		if err := patterns.ValidateID(id); err != nil {
			return nil, pkg.Wrap("OfMany", fmt.Errorf("id %d: %w", i, err))
		}
	}
	if len(sourceIDs) == 0 {
		return []S{}, nil
	}
	// One encoding of all the ids (valid ids encode), rather than one
	// per id: the keys that match them to the sources found, and the
	// distinct ids sent.
	_, data, err := bson.MarshalValue(sourceIDs)
	if err != nil {
		return nil, pkg.Wrap("OfMany", errs.Invalid("ids: %v", err))
	}
	encoded, err := bson.RawArray(data).Values()
	if err != nil {
		return nil, pkg.Wrap("OfMany", errs.Invalid("ids: %v", err))
	}
	keys := make([]string, len(sourceIDs))
	distinct := make(bson.A, 0, len(sourceIDs))
	seen := make(map[string]bool, len(sourceIDs))
	for i, id := range encoded {
		keys[i] = bsonid.Key(id)
		if !seen[keys[i]] {
			seen[keys[i]] = true
			distinct = append(distinct, id)
		}
	}
	found := make(map[string]S, len(distinct))
	for start := 0; start < len(distinct); start += r.batch {
		add := func(id bson.RawValue, s S, _ copyValue) { found[bsonid.Key(id)] = s }
		if err := r.findSources(ctx, distinct[start:min(start+r.batch, len(distinct))], add); err != nil {
			return nil, r.fail("OfMany", nil, err)
		}
	}
	out := make([]S, len(sourceIDs))
	var missing []string
	for i, k := range keys {
		s, ok := found[k]
		if !ok {
			if len(missing) < 10 {
				missing = append(missing, bsonid.Text(sourceIDs[i]))
			}
			continue
		}
		out[i] = s
	}
	if len(missing) > 0 {
		return out, r.fail("OfMany", nil, fmt.Errorf("sources %s not in %s: %w", strings.Join(missing, ", "), r.source.Name(), patterns.ErrNotFound))
	}
	return out, nil
}

// findSources reads the sources with the given ids in one find (to the
// primary, projected on the copied fields) and calls add with each one's
// _id (valid only during the call) and copy.
func (r *Ref[S]) findSources(ctx context.Context, ids bson.A, add func(id bson.RawValue, s S, c copyValue)) error {
	// One more than can match, so that the server sees the cursor is
	// exhausted and no getMore follows.
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := r.source.Find(ctx, sourcesByID(ids), options.Find().SetProjection(r.proj).SetBatchSize(int32(len(ids)+1)))
	if err != nil {
		return fmt.Errorf("read from %s: %w", r.source.Name(), err)
	}
	defer obs.Close(context.WithoutCancel(ctx), op, cur)
	for obs.Next(ctx, op, cur) {
		s, c, err := r.copyOf(cur.Current)
		if err != nil {
			return err
		}
		add(cur.Current.Lookup("_id"), s, c)
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read from %s: %w", r.source.Name(), err)
	}
	return nil
}

// fail returns err, the failure of operation op on the source with _id id
// (nil when the failure is about no one source), in the package's format
// and with server errors classified ([srverr.Classify]).
func (r *Ref[S]) fail(op string, id any, err error) error {
	if id != nil {
		err = fmt.Errorf("source %s: %w", bsonid.Text(id), err)
	}
	return pkg.Wrap(op, srverr.Classify(err))
}

// load reads the source and returns its copy, decoded and encoded.
func (r *Ref[S]) load(ctx context.Context, id any) (S, copyValue, error) {
	var zero S
	patterns.OperationFrom(ctx).Sent(1)
	raw, err := r.source.FindOne(ctx, byID(id), r.findCopy).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return zero, copyValue{}, fmt.Errorf("not in %s: %w", r.source.Name(), patterns.ErrNotFound)
	}
	if err != nil {
		return zero, copyValue{}, fmt.Errorf("read from %s: %w", r.source.Name(), err)
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
	id := src.Lookup("_id")
	idx, doc := bsoncore.AppendDocumentStart(make([]byte, 0, len(src)+len(r.ct.id)))
	doc = append(bsoncore.AppendHeader(doc, bsoncore.Type(id.Type), r.ct.id), id.Value...)
	for _, f := range r.ct.fields {
		if v, err := src.LookupErr(f); err == nil {
			doc = append(bsoncore.AppendHeader(doc, bsoncore.Type(v.Type), f), v.Value...)
		}
	}
	doc, err := bsoncore.AppendDocumentEnd(doc, idx)
	if err == nil {
		err = bson.Unmarshal(doc, &s)
	}
	var raw bson.Raw
	if err == nil {
		raw, err = bson.Marshal(s)
	}
	if err != nil {
		if idErr := r.holdsID(id); idErr != nil {
			return s, copyValue{}, idErr
		}
		return s, copyValue{}, fmt.Errorf("copy into %s: %w", r.ct.name, err)
	}
	c := copyValue{raw: raw, id: raw.Lookup(r.ct.id)}
	if !bsonid.Equal(c.id, id) {
		return s, copyValue{}, errs.Invalid("copy type %s stores %s _id %v as %v (BSON %s): the copies could not be found by their source's id; give field %q the _id's type",
			r.ct.name, r.source.Name(), id, c.id, c.id.Type, r.ct.id)
	}
	return s, c, nil
}

// holdsID returns an error wrapping [patterns.ErrInvalid] when S's id
// field cannot decode the source's _id id at all (an int field for an
// ObjectID); copyOf asks it when decoding a source fails, to tell the copy
// type's mistake from a source field's.
func (r *Ref[S]) holdsID(id bson.RawValue) error {
	b, err := bson.Marshal(bson.D{{Key: r.ct.id, Value: id}})
	if err != nil {
		return err
	}
	var s S
	if err := bson.Unmarshal(b, &s); err != nil {
		return errs.Invalid("copy type %s cannot hold %s _id %v (BSON %s) in its field %q (%v); give field %q the _id's type",
			r.ct.name, r.source.Name(), id, id.Type, r.ct.id, err, r.ct.id)
	}
	return nil
}
