package extref

import (
	"bytes"
	"math"
	"math/big"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file compares BSON values the way MongoDB's equality match does, so
// that the copies found stale in Go (by Verify, Repair and the portable
// array path) are exactly those that the native path's {$ne: value} filter
// selects: numbers compare by value whatever their type (int32 1, int64 1,
// double 1.0 and decimal 1.00 are equal), a missing field equals null,
// embedded documents compare field by field in order, and a stored array
// equals a value when one of its elements does.

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
	na, aNum := numberKey(a)
	nb, bNum := numberKey(b)
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

// numberKey returns a string that two numbers share exactly when they are
// equal in value (an integer's decimal digits, an exact fraction
// otherwise, "NaN", "+Inf", "-Inf"), and false for a value that is not a
// number.
func numberKey(v bson.RawValue) (string, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return strconv.FormatInt(int64(v.Int32()), 10), true
	case bson.TypeInt64:
		return strconv.FormatInt(v.Int64(), 10), true
	case bson.TypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return "NaN", true
		case math.IsInf(f, 0):
			return strconv.FormatFloat(f, 'f', -1, 64), true // "+Inf" or "-Inf"
		case f == math.Trunc(f) && math.Abs(f) < 1<<63:
			return strconv.FormatInt(int64(f), 10), true
		}
		return new(big.Rat).SetFloat64(f).RatString(), true
	case bson.TypeDecimal128:
		d := v.Decimal128()
		switch {
		case d.IsNaN():
			return "NaN", true
		case d.IsInf() > 0:
			return "+Inf", true
		case d.IsInf() < 0:
			return "-Inf", true
		}
		bi, exp, err := d.BigInt()
		if err != nil {
			return d.String(), true
		}
		r := new(big.Rat).SetInt(bi)
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp >= 0 {
			r.Mul(r, new(big.Rat).SetInt(scale))
		} else {
			r.Quo(r, new(big.Rat).SetInt(scale))
		}
		return r.RatString(), true
	}
	return "", false
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// idKey returns a map key for an id: ids equal under [same] share it (so a
// copy holding the id as an int64 finds a source whose _id is an int32).
func idKey(v bson.RawValue) string {
	if n, ok := numberKey(v); ok {
		return "n" + n
	}
	return string(append([]byte{byte(v.Type)}, v.Value...))
}
