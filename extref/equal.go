package extref

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// This file compares the copied fields' BSON values as whole values, the
// comparison the stale filters of an updateMany make ([staleClauses]), so
// that the copies found stale in Go (by Verify, Repair and the portable
// array path) are exactly those that Sync's filters select: numbers compare
// by value whatever their type (int32 1, int64 1, double 1.0 and decimal
// 1.00 are equal, as [bsonid.Number] decides), a missing field equals null,
// embedded documents compare field by field in order, and arrays element
// by element. An array never equals a value that is not an array, even one
// of its own elements: MongoDB's query equality matches such an array, and
// a copy ["a", "b"] of a source whose field became "a" would then never
// sync. Ids are compared with [bsonid.Equal] and keyed with [bsonid.Key]
// instead.

// stale reports whether a copy's field, stored, differs from the value the
// source gives it, want. A zero want (Type 0) means the copy type omits the
// field (an omitempty field holding its zero value): the copy is stale when
// it has the field at all, as {$exists: true} selects.
func stale(stored, want bson.RawValue) bool {
	if want.Type == 0 {
		return stored.Type != 0
	}
	return !same(stored, want)
}

// same reports whether two values are equal as whole values under
// MongoDB's comparison rules (without the array-element matching of a
// query).
func same(a, b bson.RawValue) bool {
	if nullish(a) && nullish(b) {
		return true
	}
	if a.Type == b.Type && bytes.Equal(a.Value, b.Value) {
		return true
	}
	na, aNum := bsonid.Number(a)
	nb, bNum := bsonid.Number(b)
	if aNum || bNum {
		return aNum && bNum && na == nb
	}
	switch {
	case a.Type == bson.TypeEmbeddedDocument && b.Type == bson.TypeEmbeddedDocument:
		return sameElements(a.Document().Elements, b.Document().Elements, true)
	case a.Type == bson.TypeArray && b.Type == bson.TypeArray:
		return sameElements(bson.Raw(a.Array()).Elements, bson.Raw(b.Array()).Elements, false)
	}
	return false
}

// sameElements compares two documents (keys too) or two arrays element by
// element, in order.
func sameElements(ea, eb func() ([]bson.RawElement, error), keys bool) bool {
	xs, err1 := ea()
	ys, err2 := eb()
	if err1 != nil || err2 != nil || len(xs) != len(ys) {
		return false
	}
	for i := range xs {
		if keys && xs[i].Key() != ys[i].Key() {
			return false
		}
		if !same(xs[i].Value(), ys[i].Value()) {
			return false
		}
	}
	return true
}

func nullish(v bson.RawValue) bool {
	return v.Type == 0 || v.Type == bson.TypeNull || v.Type == bson.TypeUndefined
}
