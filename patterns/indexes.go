package patterns

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// MaxDocumentSize is the largest BSON document MongoDB stores: 16 MiB.
const MaxDocumentSize = 16 * 1024 * 1024

// Index is one index that a repository's queries need, on the collection
// that holds it. Repositories report theirs from an Indexes method (a
// repository may span several collections, so a bare [mongo.IndexModel]
// would not say where it goes); [EnsureIndexes] creates them.
type Index struct {
	Collection *mongo.Collection
	Model      mongo.IndexModel
	// EveryShard, when not empty, says why the queries this index serves
	// read the whole collection by design (bucket's DeleteBefore, which
	// names no series; versioning's MigrateAll, which scans by version): on
	// a sharded cluster they go to every shard under any good shard key,
	// and the doctor does not report them
	// (doctor.RuleShardKeyDeclaredQueries).
	EveryShard string
}

// EnsureIndexes creates the given indexes, idempotently: an index that
// already exists with the same key and options is left as it is. It sends
// one createIndexes command per distinct collection, in the order the
// collections first appear, and one per index on a server without
// [FeatureCreateManyIndexes] (FerretDB 1.x), after asking [Capabilities]
// (cached per client). An existing index with the same name or key but
// other options is an error from the server (IndexOptionsConflict or
// IndexKeySpecsConflict); it names the collection and is returned as is,
// and indexes for later collections are not created.
//
// Build indexes before the first write in production: on a large
// collection a build takes time and load, which is why repositories never
// create indexes implicitly.
func EnsureIndexes(ctx context.Context, indexes ...Index) error {
	type group struct {
		coll   *mongo.Collection
		models []mongo.IndexModel
	}
	var groups []*group
	for i, ix := range indexes {
		if ix.Collection == nil {
			return fmt.Errorf("patterns: EnsureIndexes: index %d has no collection: %w", i, ErrInvalid)
		}
		if ix.Model.Keys == nil {
			return fmt.Errorf("patterns: EnsureIndexes: index %d on %s has no keys: %w", i, ix.Collection.Name(), ErrInvalid)
		}
		at := slices.IndexFunc(groups, func(g *group) bool {
			return g.coll.Name() == ix.Collection.Name() && g.coll.Database().Name() == ix.Collection.Database().Name()
		})
		if at < 0 {
			groups = append(groups, &group{coll: ix.Collection})
			at = len(groups) - 1
		}
		groups[at].models = append(groups[at].models, ix.Model)
	}
	if len(groups) == 0 {
		return nil
	}
	srv, err := Capabilities(ctx, groups[0].coll.Database().Client())
	if err != nil {
		return fmt.Errorf("patterns: EnsureIndexes: %w", err)
	}
	for _, g := range groups {
		batches := [][]mongo.IndexModel{g.models}
		if !srv.Has(FeatureCreateManyIndexes) {
			batches = batches[:0]
			for _, m := range g.models {
				batches = append(batches, []mongo.IndexModel{m})
			}
		}
		for _, b := range batches {
			if _, err := g.coll.Indexes().CreateMany(ctx, b); err != nil {
				return fmt.Errorf("patterns: EnsureIndexes: %s.%s: %w", g.coll.Database().Name(), g.coll.Name(), err)
			}
		}
	}
	return nil
}
