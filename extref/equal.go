package extref

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// This file compares the copied fields' BSON values the way MongoDB's
// equality match does, so that the copies found stale in Go (by Verify,
// Repair and the portable array path) are exactly those that an
// updateMany's {$ne: value} filter selects: numbers compare by value
// whatever their type (int32 1, int64 1, double 1.0 and decimal 1.00 are
// equal, as [bsonid.Number] decides), a missing field equals null,
// embedded documents compare field by field in order, and a stored array
// equals a value when one of its elements does. Ids are compared with
// [bsonid.Equal] and keyed with [bsonid.Key] instead.

// stale reports whether a copy's field, stored, differs from the value the
// source gives it, want. A zero want (Type 0) means the copy type omits the
// field (an omitempty field holding its zero value): the copy is stale when
// it has the field at all, as {$exists: true} selects.
func stale(stored, want bson.RawValue) bool {
	if want.Type == 0 {
		return stored.Type != 0
	}
	return !matches(stored, want)
}

// matches reports whether the query {path: want} matches a document whose
// value at path is stored (Type 0 when the field is missing).
func matches(stored, want bson.RawValue) bool {
	if same(stored, want) {
		return true
	}
	if stored.Type != bson.TypeArray {
		return false
	}
	vals, err := stored.Array().Values()
	if err != nil {
		return false
	}
	for _, v := range vals {
		if same(v, want) {
			return true
		}
	}
	return false
}

// same reports whether two values are equal under MongoDB's comparison
// rules (without the array-element matching of a query).
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
