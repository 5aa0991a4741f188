// Package bsonid compares document ids the way the server does. A query
// {_id: 7} matches a document whose _id is int32 7, int64 7, the double
// 7.0 or the decimal 7.00: numbers compare by value, whatever their BSON
// type. Embedded documents and arrays are equal when they hold the same
// field names in the same order with equal values, numbers inside them
// again by value at every depth: {sensor: 7} and {sensor: 7.0} are one
// value to the server's equality. A string and a symbol of the same bytes
// are one value too (the server's sort order puts them in one place and
// compares their bytes; its unique index on _id holds one of them).
// Every other value is the same id only with the same type and the same
// bytes. Every repository compares ids
// through this package, so that an id given as a Go int finds an item
// stored with an int64 or a double.
package bsonid

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Equal reports whether a and b are the same id to the server.
func Equal(a, b bson.RawValue) bool {
	if canonical(a.Type) == canonical(b.Type) && bytes.Equal(a.Value, b.Value) {
		return true
	}
	if x, ok := Number(a); ok {
		y, ok := Number(b)
		return ok && x == y
	}
	return a.Type == b.Type && nested(a.Type) && Key(a) == Key(b)
}

// Key returns a string that two ids share exactly when they are [Equal],
// for maps and sets of ids.
func Key(v bson.RawValue) string {
	if n, ok := Number(v); ok {
		return "n" + n
	}
	if nested(v.Type) {
		if k, ok := appendNested(nil, v); ok {
			return string(k)
		}
	}
	return string(append([]byte{byte(canonical(v.Type))}, v.Value...))
}

// canonical returns t, but the string type for a symbol, which the
// server compares with the strings by its bytes (a symbol's value is
// encoded as a string's is).
func canonical(t bson.Type) bson.Type {
	if t == bson.TypeSymbol {
		return bson.TypeString
	}
	return t
}

// nested reports whether values of type t hold other values.
func nested(t bson.Type) bool { return t == bson.TypeEmbeddedDocument || t == bson.TypeArray }

// appendNested appends the key of v, an embedded document or an array, to
// dst: its type, then per field its name, a NUL, and the key of its value
// (see [Key]) after the key's length, so that no two sequences of fields
// give one key; false when v is malformed (its key is then its bytes).
func appendNested(dst []byte, v bson.RawValue) ([]byte, bool) {
	els, err := bson.Raw(v.Value).Elements()
	if err != nil {
		return nil, false
	}
	dst = append(dst, byte(v.Type))
	for _, e := range els {
		k, err := e.KeyErr()
		if err != nil {
			return nil, false
		}
		ev, err := e.ValueErr()
		if err != nil {
			return nil, false
		}
		dst = append(append(dst, k...), 0)
		sub := Key(ev)
		dst = binary.AppendUvarint(dst, uint64(len(sub)))
		dst = append(dst, sub...)
	}
	return dst, true
}

// Number returns a string that two numbers share exactly when they are
// equal in value (an integer's decimal digits, an exact fraction
// otherwise, "NaN", "+Inf", "-Inf"), and false for a value that is not a
// number (int32, int64, double or decimal128).
func Number(v bson.RawValue) (string, bool) {
	switch v.Type {
	case bson.TypeInt32:
		i, ok := v.Int32OK()
		return strconv.FormatInt(int64(i), 10), ok
	case bson.TypeInt64:
		i, ok := v.Int64OK()
		return strconv.FormatInt(i, 10), ok
	case bson.TypeDouble:
		f, ok := v.DoubleOK()
		if !ok {
			return "", false
		}
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
		d, ok := v.Decimal128OK()
		if !ok {
			return "", false
		}
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
		scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, -exp))), nil))
		if exp >= 0 {
			r.Mul(r, scale)
		} else {
			r.Quo(r, scale)
		}
		return r.RatString(), true
	}
	return "", false
}

// IsNaN reports whether v is a NaN, a double's or a decimal's: a value
// that the server sorts before every other number and that no range
// operator finds (NaN is neither above nor below any number).
func IsNaN(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeDouble:
		f, ok := v.DoubleOK()
		return ok && math.IsNaN(f)
	case bson.TypeDecimal128:
		d, ok := v.Decimal128OK()
		return ok && d.IsNaN()
	}
	return false
}

// Text writes an id (a bson.RawValue, or any value the driver encodes) for
// an error message, as every repository names ids: a string quoted, a
// number in digits, an ObjectID in hex, anything else in Extended JSON.
func Text(id any) string {
	v, ok := id.(bson.RawValue)
	if !ok {
		t, data, err := bson.MarshalValue(id)
		if err != nil {
			return fmt.Sprintf("%v", id)
		}
		v = bson.RawValue{Type: t, Value: data}
	}
	switch v.Type {
	case bson.TypeString:
		return strconv.Quote(v.StringValue())
	case bson.TypeInt32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case bson.TypeInt64:
		return strconv.FormatInt(v.Int64(), 10)
	case bson.TypeDouble:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case bson.TypeObjectID:
		return v.ObjectID().Hex()
	}
	return v.String()
}

// Int returns the value of v when v is a number (int32, int64, double or
// decimal128) whose value is a whole number within int64 (-0 is 0, the
// decimal 3.00 is 3), and false for anything else: a fraction, NaN, an
// infinity, a whole number beyond int64, a value that is not a number.
func Int(v bson.RawValue) (int64, bool) {
	n, ok := Number(v)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return 0, false
	}
	return i, true
}
