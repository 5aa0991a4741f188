// Package bsonkinds generates BSON values by class, for tests: one value
// or more of every class of the server's sort order (the manual's
// "Comparison/Sort Order", MongoDB's canonicalizeBSONType), with the
// values that the server compares as equal side by side, and the odd ones
// a user may send or store: -0, infinities, double and decimal NaN,
// integers past 2^53, decimals past float64's range, symbols beside
// strings, documents whose numbers differ in type only, binary subtypes,
// JavaScript with and without scope, DBPointer, MinKey and MaxKey.
//
// A test walks [All] (or [IDs]) and states, per value, what the door it
// tests does: refuse it with patterns.ErrInvalid, or store it, read it
// back equal and yield it once, in the order [Compare] gives. Only tests
// import it.
package bsonkinds

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// Class is a place in the server's sort order of BSON types, lowest
// first. Values of one class compare with each other; a value of a lower
// class sorts before every value of a higher one.
type Class int

// The classes, in the server's sort order.
const (
	MinKey    Class = iota
	Undefined       // deprecated; sorts before null (MongoDB refuses it as an _id)
	Null            // null, and a missing field (Value.Missing), which sorts as null
	Number          // int32, int64, double, Decimal128: compared by value
	String          // strings and symbols: compared together, by bytes
	Object
	Array
	Binary
	ObjectID
	Bool
	Date
	Timestamp
	Regex
	DBPointer
	JavaScript
	JavaScriptWithScope
	MaxKey
)

var classNames = [...]string{
	"MinKey", "undefined", "null", "number", "string", "object", "array", "binData",
	"ObjectId", "bool", "date", "timestamp", "regex", "DBPointer",
	"JavaScript", "JavaScript with scope", "MaxKey",
}

func (c Class) String() string { return classNames[c] }

// Value is one generated value.
type Value struct {
	Name  string // unique: "double NaN", "symbol a", ...
	Class Class
	// Rank is the value's place in the sort order: a lower rank sorts
	// first, and values of equal rank compare as equal (int32 7 and the
	// double 7.0; double and decimal NaN; a string and a symbol of the
	// same bytes; null and missing).
	Rank int
	// V is the value; the zero RawValue when Missing.
	V       bson.RawValue
	Missing bool // the field is absent
}

// Compare compares a and b in the server's sort order: -1, 0 (equal to
// the server) or +1.
func Compare(a, b Value) int {
	switch {
	case a.Rank < b.Rank:
		return -1
	case a.Rank > b.Rank:
		return 1
	}
	return 0
}

// Doc returns a document with the value at key, or without key when the
// value is Missing, after the fields of head.
func (v Value) Doc(key string, head ...bson.E) bson.D {
	d := append(bson.D{}, head...)
	if v.Missing {
		return d
	}
	return append(d, bson.E{Key: key, Value: v.V})
}

// IsID reports whether MongoDB stores the value as an _id: every value
// but a missing one, undefined, an array and a regular expression, which
// its inserts refuse.
func (v Value) IsID() bool {
	return !v.Missing && v.Class != Undefined && v.Class != Array && v.Class != Regex
}

// All returns every generated value, in ascending sort order (by Rank).
// Each call builds fresh values.
func All() []Value {
	var out []Value
	for rank, g := range groups() {
		for _, e := range g {
			v := Value{Name: e.name, Class: e.class, Rank: rank, Missing: e.missing}
			if !e.missing {
				t, data, err := bson.MarshalValue(e.v)
				if err != nil {
					panic("bsonkinds: " + e.name + ": " + err.Error())
				}
				v.V = bson.RawValue{Type: t, Value: data}
			}
			out = append(out, v)
		}
	}
	return out
}

// IDs returns the values of [All] that MongoDB stores as an _id
// ([Value.IsID]), in ascending order.
func IDs() []Value {
	var out []Value
	for _, v := range All() {
		if v.IsID() {
			out = append(out, v)
		}
	}
	return out
}

// Odd returns the values of [IDs] that a scan naming the common types
// only (null to timestamps, in $type) and paging with $gt would miss: a
// NaN, MinKey, a symbol, a DBPointer, JavaScript with or without scope,
// MaxKey.
func Odd() []Value {
	var out []Value
	for _, v := range IDs() {
		if bsonid.IsNaN(v.V) || v.Class < Null || v.Class > Timestamp || v.V.Type == bson.TypeSymbol {
			out = append(out, v)
		}
	}
	return out
}

// Of returns the values of [All] of the given classes, in order.
func Of(classes ...Class) []Value {
	var out []Value
	for _, v := range All() {
		for _, c := range classes {
			if v.Class == c {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

type entry struct {
	name    string
	class   Class
	v       any
	missing bool
}

func dec(s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		panic("bsonkinds: decimal " + s + ": " + err.Error())
	}
	return d
}

// groups lists the values as groups of equal ones, in ascending order.
func groups() [][]entry {
	oid := func(b byte) bson.ObjectID { return bson.ObjectID{0: 0x65, 11: b} }
	bin := func(sub byte, n int, fill byte) bson.Binary {
		data := make([]byte, n)
		for i := range data {
			data[i] = fill
		}
		return bson.Binary{Subtype: sub, Data: data}
	}
	num := func(name string, v any) entry { return entry{name, Number, v, false} }
	str := func(name string, v any) entry { return entry{name, String, v, false} }
	obj := func(name string, v any) entry { return entry{name, Object, v, false} }
	one := func(name string, c Class, v any) []entry { return []entry{{name, c, v, false}} }
	return [][]entry{
		one("MinKey", MinKey, bson.MinKey{}),
		one("undefined", Undefined, bson.Undefined{}),
		{{"null", Null, bson.Null{}, false}, {"missing", Null, nil, true}},
		// NaN sorts before every other number; double and decimal NaN
		// are one value to the server (one key of a unique index).
		{num("double NaN", math.NaN()), num("decimal NaN", dec("NaN"))},
		{num("double -Inf", math.Inf(-1)), num("decimal -Inf", dec("-Infinity"))},
		{num("decimal -1E+400", dec("-1E+400"))},
		{num("int64 min", int64(math.MinInt64))},
		{num("double -0", math.Copysign(0, -1)), num("int32 0", int32(0)), num("double 0", 0.0), num("decimal 0", dec("0"))},
		{num("double 0.5", 0.5), num("decimal 0.50", dec("0.50"))},
		{num("int32 7", int32(7)), num("int64 7", int64(7)), num("double 7", 7.0), num("decimal 7", dec("7")), num("decimal 7.00", dec("7.00"))},
		{num("double 2^53", float64(1<<53)), num("int64 2^53", int64(1<<53))},
		// Past 2^53 a double cannot tell neighbours apart; the server
		// compares int64 exactly.
		{num("int64 2^53+1", int64(1<<53+1))},
		{num("int64 max", int64(math.MaxInt64))},
		{num("double max", math.MaxFloat64)},
		{num("decimal 1E+400", dec("1E+400"))},
		{num("double +Inf", math.Inf(1)), num("decimal +Inf", dec("Infinity"))},
		// Strings and symbols compare together, by their bytes.
		{str("string a", "a"), str("symbol a", bson.Symbol("a"))},
		{str("symbol b", bson.Symbol("b"))},
		{str("string c", "c")},
		{str("string é", "é")},
		// Documents compare field by field (type, name, value); numbers
		// inside by value.
		{obj("document {a: int32 1}", bson.D{{Key: "a", Value: int32(1)}}), obj("document {a: double 1}", bson.D{{Key: "a", Value: 1.0}}), obj("document {a: decimal 1.0}", bson.D{{Key: "a", Value: dec("1.0")}})},
		{obj("document {a: 1, b: int64 2}", bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int64(2)}})},
		// The types of the first fields before their names: {b: 0}
		// sorts before {a: "x"}.
		{obj("document {b: 0}", bson.D{{Key: "b", Value: int32(0)}})},
		{obj("document {a: \"x\"}", bson.D{{Key: "a", Value: "x"}})},
		{{"array [1]", Array, bson.A{int32(1)}, false}, {"array [1.0]", Array, bson.A{1.0}, false}},
		one("array [2]", Array, bson.A{int32(2)}),
		// Binary data compares by length, then subtype, then bytes.
		one("binary generic 1 byte", Binary, bin(0, 1, 1)),
		one("binary generic 16 bytes", Binary, bin(0, 16, 0)),
		// Other bytes than the generic one's: FerretDB 1.x ignores the
		// subtype in a unique index (a UUID of 16 zero bytes is a
		// duplicate of the generic 16 zero bytes there).
		one("binary UUID", Binary, bin(bson.TypeBinaryUUID, 16, 0x11)),
		one("binary user-defined", Binary, bin(0x80, 16, 0x22)),
		one("ObjectID 1", ObjectID, oid(1)),
		one("ObjectID 2", ObjectID, oid(2)),
		one("false", Bool, false),
		one("true", Bool, true),
		one("date before 1970", Date, bson.DateTime(-1)),
		one("date 1970+5ms", Date, bson.DateTime(5)),
		one("timestamp 1.1", Timestamp, bson.Timestamp{T: 1, I: 1}),
		one("timestamp 1.2", Timestamp, bson.Timestamp{T: 1, I: 2}),
		one("regex /a/", Regex, bson.Regex{Pattern: "a"}),
		one("regex /a/i", Regex, bson.Regex{Pattern: "a", Options: "i"}),
		one("DBPointer", DBPointer, bson.DBPointer{DB: "db.c", Pointer: oid(1)}),
		one("JavaScript x", JavaScript, bson.JavaScript("x")),
		one("JavaScript y", JavaScript, bson.JavaScript("y")),
		one("JavaScript with scope", JavaScriptWithScope, bson.CodeWithScope{Code: "y", Scope: bson.D{{Key: "a", Value: int32(1)}}}),
		one("MaxKey", MaxKey, bson.MaxKey{}),
	}
}
