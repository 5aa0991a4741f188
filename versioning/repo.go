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
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
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
	// Indexes returns the indexes the store's queries need, for
	// [patterns.EnsureIndexes].
	Indexes() []patterns.Index
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
// A Repo is safe for concurrent use, by goroutines and by processes
// sharing the collection. On FerretDB 1.x this holds only for one client
// with one connection: see [patterns.FeatureConcurrentUpdates]. Besides
// its configuration a Repo holds only its plan: how it uses its server,
// decided from the server's features on first use (two commands, once
// per client; a failed detection is not kept).
type Repo[T any] struct {
	schema
	coll      *mongo.Collection
	steps     []func(*Doc) error // steps[k-oldest] migrates k to k+1
	writeBack bool

	planned lazy.Value[plan]

	hook        patterns.Hook // Config.Hook
	collections []string      // Config.Collection, for the hook
}

// New returns a repository over db's collection cfg.Collection. It checks
// the configuration and returns an error wrapping [patterns.ErrInvalid]
// naming what is wrong: a nil database, an invalid collection name, an
// invalid or reserved field name (in ShardKey too), Current out of range, a migration
// without a function, two migrations from one version, a migration from
// Current or beyond, a gap in the chain, or an implicit version outside
// the versions this code reads.
//
// New sends nothing and creates no index: see [Repo.Indexes].
func New[T any](db *mongo.Database, cfg Config) (*Repo[T], error) {
	if db == nil {
		return nil, pkg.Wrap("New", errs.Invalid("nil database"))
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, pkg.Wrap("New", err)
	}
	steps := make([]func(*Doc) error, len(cfg.Migrations))
	for i, m := range cfg.Migrations {
		steps[i] = m.Up
	}
	return &Repo[T]{
		schema: schema{
			field:    cfg.VersionField,
			revField: cfg.RevisionField,
			current:  cfg.Current,
			implicit: cfg.Implicit,
			oldest:   cfg.oldest(),
			shardKey: cfg.ShardKey,
		},
		coll:        db.Collection(cfg.Collection),
		steps:       steps,
		writeBack:   !cfg.NoWriteBack,
		hook:        cfg.Hook,
		collections: []string{cfg.Collection},
	}, nil
}

// start starts the operation name for the repository's hook (see
// [obs.Start]).
func (r *Repo[T]) start(ctx context.Context, name string) (context.Context, *patterns.Operation) {
	return obs.Start(ctx, r.hook, &r.planned, string(pkg), name, r.coll.Database().Name(), r.collections)
}

// Indexes returns the index that MigrateAll's scan and Stats use: the
// version field, ascending. Create it with [patterns.EnsureIndexes];
// without it MigrateAll and Stats read the whole collection.
func (r *Repo[T]) Indexes() []patterns.Index {
	return []patterns.Index{{Collection: r.coll, Model: mongo.IndexModel{Keys: r.versionIndex()},
		EveryShard: "MigrateAll and Stats scan every document by version, on every shard; never shard on the version field, which every write changes"}}
}

// plan returns the repository's plan, deciding it on first use.
func (r *Repo[T]) plan(ctx context.Context) (plan, error) {
	p, err := lazy.Decide(ctx, &r.planned, r.coll.Database().Client(), planFor)
	if err != nil {
		return p, fmt.Errorf("detect the server: %w", err)
	}
	return p, nil
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
	return conflict()
}

// conflict is the error of a guarded write that kept missing.
func conflict() error {
	return fmt.Errorf("the document kept changing (%d attempts): %w", maxAttempts, patterns.ErrConflict)
}

// findRaw reads the document id as stored.
func (r *Repo[T]) findRaw(ctx context.Context, id any) (bson.Raw, error) {
	patterns.OperationFrom(ctx).Sent(1)
	raw, err := r.coll.FindOne(ctx, idFilter(id)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, notFound()
	}
	return raw, err
}

// replaceOne replaces the document filter matches with doc, retrying a
// transient failure (every replacement the repository sends is guarded,
// so sending it again is safe), and reports whether it matched.
func (r *Repo[T]) replaceOne(ctx context.Context, filter bson.D, doc bson.Raw) (bool, error) {
	var res *mongo.UpdateResult
	op := patterns.OperationFrom(ctx)
	err := srverr.Retry(ctx, func() (err error) {
		op.Sent(1)
		res, err = r.coll.ReplaceOne(ctx, filter, doc)
		return err
	})
	if err != nil {
		return false, err
	}
	return res.MatchedCount == 1, nil
}
