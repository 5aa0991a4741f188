// Package esr builds compound index keys in ESR order (Equality, Sort,
// Range), the order MongoDB's indexing guide recommends: the equality
// fields narrow the index to one key range, the sort fields then yield
// documents already in order, and the range fields are scanned last.
package esr

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Role is the part a field plays in a query.
type Role int

// The roles, in the order a key puts them.
const (
	RoleEquality Role = iota // matched by equality ({path: value})
	RoleSort                 // sorted on
	RoleRange                // filtered by a range ($gt, $lt, $in of several values...)
)

// Field is one field of a compound key, with the role it plays in the
// queries the index serves. Build it with [Equality], [Sort] or [Range].
type Field struct {
	Path      string
	Role      Role
	Direction int  // 1 or -1; only sort fields may be -1
	Array     bool // the field holds arrays (the index is multikey on it)
}

// Equality is a field the query matches by equality.
func Equality(path string) Field { return Field{Path: path, Role: RoleEquality, Direction: 1} }

// Sort is a field the query sorts on, in direction 1 or -1.
func Sort(path string, direction int) Field {
	return Field{Path: path, Role: RoleSort, Direction: direction}
}

// Range is a field the query filters by a range.
func Range(path string) Field { return Field{Path: path, Role: RoleRange, Direction: 1} }

// Multikey marks the field as holding arrays.
func (f Field) Multikey() Field { f.Array = true; return f }

// Key orders the fields by role, Equality, then Sort, then Range, each
// group in the order given, and returns the index key. It rejects,
// wrapping patterns.ErrInvalid: no fields; an invalid path; a field given
// twice; a direction other than 1 or -1; and more than one array field,
// since MongoDB cannot index parallel arrays.
func Key(fields ...Field) (bson.D, error) {
	if len(fields) == 0 {
		return nil, errs.Invalid("index key without fields")
	}
	arrays := 0
	for i, f := range fields {
		if err := check.Path(f.Path); err != nil {
			return nil, err
		}
		switch {
		case f.Direction != 1 && f.Direction != -1:
			return nil, errs.Invalid("index key field %q: direction %d is neither 1 nor -1", f.Path, f.Direction)
		case f.Role < RoleEquality || f.Role > RoleRange:
			return nil, errs.Invalid("index key field %q: unknown role %d", f.Path, f.Role)
		case slices.ContainsFunc(fields[:i], func(g Field) bool { return g.Path == f.Path }):
			return nil, errs.Invalid("index key field %q appears twice", f.Path)
		}
		if f.Array {
			arrays++
		}
	}
	if arrays > 1 {
		return nil, errs.Invalid("index key with %d array fields; it may hold at most one (MongoDB cannot index parallel arrays)", arrays)
	}
	sorted := slices.Clone(fields)
	slices.SortStableFunc(sorted, func(a, b Field) int { return int(a.Role) - int(b.Role) })
	key := make(bson.D, len(sorted))
	for i, f := range sorted {
		key[i] = bson.E{Key: f.Path, Value: f.Direction}
	}
	return key, nil
}
