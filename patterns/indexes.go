package patterns

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
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
}

// EnsureIndexes creates the given indexes, idempotently: an index that
// already exists with the same key and options is left as it is. It sends
// one createIndexes command per distinct collection, in the order the
// collections first appear. On FerretDB it sends one per index instead:
// FerretDB 1.24 drops the connection when a createIndexes that names
// several indexes finds them all existing. An existing index with the same name or key
// but other options is an error from the server (IndexOptionsConflict or
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
			return Invalidf("EnsureIndexes: index %d has no collection", i)
		}
		if ix.Model.Keys == nil {
			return Invalidf("EnsureIndexes: index %d on %s has no keys", i, ix.Collection.Name())
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
		return fmt.Errorf("EnsureIndexes: %w", err)
	}
	for _, g := range groups {
		batches := [][]mongo.IndexModel{g.models}
		if srv.Kind == KindFerretDB {
			batches = batches[:0]
			for _, m := range g.models {
				batches = append(batches, []mongo.IndexModel{m})
			}
		}
		for _, b := range batches {
			if _, err := g.coll.Indexes().CreateMany(ctx, b); err != nil {
				return fmt.Errorf("EnsureIndexes: %s.%s: %w", g.coll.Database().Name(), g.coll.Name(), err)
			}
		}
	}
	return nil
}

// ESRRole is the part a field plays in a query: matched by equality,
// sorted on, or filtered by a range.
type ESRRole int

// The roles, in the order an ESR key puts them.
const (
	RoleEquality ESRRole = iota
	RoleSort
	RoleRange
)

// KeyField is one field of a compound index key, with the role it plays in
// the queries the index serves. Build it with [Equality], [SortOn] or
// [Range].
type KeyField struct {
	Path      string
	Role      ESRRole
	Direction int  // 1 or -1; only sort fields may be -1
	Array     bool // the field holds arrays (the index is multikey on it)
}

// Equality is a field the query matches by equality ({path: value}).
func Equality(path string) KeyField { return KeyField{Path: path, Role: RoleEquality, Direction: 1} }

// SortOn is a field the query sorts on, in direction 1 (ascending) or -1
// (descending).
func SortOn(path string, direction int) KeyField {
	return KeyField{Path: path, Role: RoleSort, Direction: direction}
}

// Range is a field the query filters by a range ($gt, $lt, $in with
// several values, ...).
func Range(path string) KeyField { return KeyField{Path: path, Role: RoleRange, Direction: 1} }

// Multikey marks the field as holding arrays.
func (f KeyField) Multikey() KeyField { f.Array = true; return f }

// ESRKey orders the fields of a compound index key by the ESR rule:
// Equality fields first, then Sort fields, then Range fields, each group in
// the order given. So the index narrows to one key range by the equality
// fields, yields documents already in sort order, and scans the range last.
//
// It rejects, wrapping [ErrInvalid]: no fields; an invalid path; a field
// given twice; a sort direction other than 1 or -1; and more than one array
// field, since MongoDB cannot index parallel arrays.
func ESRKey(fields ...KeyField) (bson.D, error) {
	if len(fields) == 0 {
		return nil, Invalidf("ESRKey: no fields")
	}
	arrays := 0
	for i, f := range fields {
		if err := ValidatePath(f.Path); err != nil {
			return nil, fmt.Errorf("ESRKey: field %d: %w", i, err)
		}
		if f.Direction != 1 && f.Direction != -1 {
			return nil, Invalidf("ESRKey: field %q: direction %d is neither 1 nor -1", f.Path, f.Direction)
		}
		if f.Role < RoleEquality || f.Role > RoleRange {
			return nil, Invalidf("ESRKey: field %q: unknown role %d", f.Path, f.Role)
		}
		if slices.ContainsFunc(fields[:i], func(g KeyField) bool { return g.Path == f.Path }) {
			return nil, Invalidf("ESRKey: field %q appears twice", f.Path)
		}
		if f.Array {
			arrays++
		}
	}
	if arrays > 1 {
		return nil, Invalidf("ESRKey: %d array fields; an index key may hold at most one (MongoDB cannot index parallel arrays)", arrays)
	}
	sorted := slices.Clone(fields)
	slices.SortStableFunc(sorted, func(a, b KeyField) int { return int(a.Role) - int(b.Role) })
	key := make(bson.D, len(sorted))
	for i, f := range sorted {
		key[i] = bson.E{Key: f.Path, Value: f.Direction}
	}
	return key, nil
}
