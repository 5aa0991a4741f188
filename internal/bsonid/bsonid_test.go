package bsonid_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

func val(t testing.TB, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

func dec(t testing.TB, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	require.NoError(t, err)
	return d
}

func TestEqual(t *testing.T) {
	oid := bson.NewObjectID()
	tests := []struct {
		name string
		a, b any
		want bool
	}{
		{"int32 and int64", int32(7), int64(7), true},
		{"int and double", 7, 7.0, true},
		{"int64 and decimal", int64(7), dec(t, "7.00"), true},
		{"double fraction and decimal", 0.5, dec(t, "0.5"), true},
		{"different numbers", 7, 8, false},
		{"7 and 7.5", 7, 7.5, false},
		{"large int64 and nearest double", int64(1<<53 + 1), float64(1 << 53), false},
		{"number and string", 7, "7", false},
		{"strings", "a", "a", true},
		{"different strings", "a", "b", false},
		{"ObjectIDs", oid, oid, true},
		{"ObjectID and its hex", oid, oid.Hex(), false},
		{"negative zero", 0.0, math.Copysign(0, -1), true},
		{"int32 and int64 in a document", bson.D{{Key: "sensor", Value: int32(7)}}, bson.D{{Key: "sensor", Value: int64(7)}}, true},
		{"int and double in a document", bson.D{{Key: "sensor", Value: 7}}, bson.D{{Key: "sensor", Value: 7.0}}, true},
		{"decimals in a document", bson.D{{Key: "sensor", Value: dec(t, "7.00")}}, bson.D{{Key: "sensor", Value: int64(7)}}, true},
		{"decimal fraction and double in a document", bson.D{{Key: "v", Value: dec(t, "0.50")}}, bson.D{{Key: "v", Value: 0.5}}, true},
		{"numbers deep inside", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{int32(1), bson.D{{Key: "c", Value: 2.0}}}}}}}, bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{1.0, bson.D{{Key: "c", Value: dec(t, "2")}}}}}}}, true},
		{"numbers in an array", bson.A{int32(1), int64(2)}, bson.A{1.0, dec(t, "2.0")}, true},
		{"different numbers in a document", bson.D{{Key: "sensor", Value: 7}}, bson.D{{Key: "sensor", Value: 7.5}}, false},
		{"number and string in a document", bson.D{{Key: "sensor", Value: 7}}, bson.D{{Key: "sensor", Value: "7"}}, false},
		{"fields in another order", bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, bson.D{{Key: "b", Value: 2}, {Key: "a", Value: 1}}, false},
		{"other field names", bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "b", Value: 1}}, false},
		{"a field more", bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}, false},
		{"a document and an array", bson.D{{Key: "0", Value: 1}}, bson.A{1}, false},
		{"a field's name and value not confused", bson.D{{Key: "ab", Value: "c"}}, bson.D{{Key: "a", Value: "bc"}}, false},
		{"a nested document and its fields", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: 1}}}}, bson.D{{Key: "a", Value: bson.D{}}, {Key: "b", Value: 1}}, false},
		{"strings in documents", bson.D{{Key: "s", Value: "x"}}, bson.D{{Key: "s", Value: "x"}}, true},
		{"double and decimal NaN", math.NaN(), dec(t, "NaN"), true},
		// Server: canonicalizeBSONType puts String and Symbol in one place,
		// compareElementValues compares their bytes (issue 31).
		{"string and symbol of the same bytes", "x", bson.Symbol("x"), true},
		{"string and symbol of other bytes", "x", bson.Symbol("y"), false},
		{"string and symbol in a document", bson.D{{Key: "a", Value: "y"}}, bson.D{{Key: "a", Value: bson.Symbol("y")}}, true},
		{"NaN and a number", math.NaN(), 0.0, false},
		{"infinities", math.Inf(1), dec(t, "Infinity"), true},
		{"opposite infinities", math.Inf(1), math.Inf(-1), false},
		{"decimal negative zero", dec(t, "-0"), int32(0), true},
		{"int64 beyond 2^53 and decimal", int64(1<<53 + 1), dec(t, "9007199254740993"), true},
		{"decimal beyond 2^53 and the nearest double", dec(t, "9007199254740993"), float64(1 << 53), false},
		{"decimals beyond float64", dec(t, "1E+400"), dec(t, "10E+399"), true},
		{"decimal beyond float64 and the largest double", dec(t, "1E+400"), math.MaxFloat64, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := val(t, tc.a), val(t, tc.b)
			require.Equal(t, tc.want, bsonid.Equal(a, b))
			require.Equal(t, tc.want, bsonid.Equal(b, a))
			require.Equal(t, tc.want, bsonid.Key(a) == bsonid.Key(b), "Key agrees with Equal")
		})
	}
}

// FuzzKey checks that Key agrees with Equal and that integers of every
// width and integral doubles share a key, alone and inside documents and
// arrays.
func FuzzKey(f *testing.F) {
	f.Add(int64(0), 0.0, "")
	f.Add(int64(-3), 2.5, "x")
	f.Fuzz(func(t *testing.T, n int64, x float64, s string) {
		vals := []bson.RawValue{val(t, n), val(t, x), val(t, s)}
		if n == int64(int32(n)) {
			vals = append(vals, val(t, int32(n)))
		}
		if float64(int64(x)) == x && math.Abs(x) < 1<<63 {
			require.True(t, bsonid.Equal(val(t, x), val(t, int64(x))), "%v", x)
		}
		for _, v := range vals[:len(vals):len(vals)] {
			// The same values inside a document and an array: equal as
			// their fields are.
			vals = append(vals, val(t, bson.D{{Key: "k", Value: v}}), val(t, bson.A{v, bson.D{{Key: strings.ReplaceAll(s, "\x00", ""), Value: v}}}))
		}
		for _, a := range vals {
			for _, b := range vals {
				require.Equal(t, bsonid.Equal(a, b), bsonid.Key(a) == bsonid.Key(b), "%v %v", a, b)
			}
		}
	})
}

// TestInt: whole numbers of the four types within int64 are integers,
// whatever their type or scale; nothing else is.
func TestInt(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
		ok   bool
	}{
		{int32(3), 3, true},
		{int64(-5), -5, true},
		{3.0, 3, true},
		{math.Copysign(0, -1), 0, true},
		{dec(t, "3"), 3, true},
		{dec(t, "3.00"), 3, true},
		{dec(t, "30E-1"), 3, true},
		{dec(t, "-0"), 0, true},
		{int64(math.MaxInt64), math.MaxInt64, true},
		{dec(t, "9223372036854775807"), math.MaxInt64, true},
		{dec(t, "9223372036854775808"), 0, false},
		{float64(1 << 63), 0, false},
		{-float64(1 << 63), math.MinInt64, true},
		{2.9, 0, false},
		{dec(t, "2.9"), 0, false},
		{math.NaN(), 0, false},
		{dec(t, "NaN"), 0, false},
		{math.Inf(1), 0, false},
		{dec(t, "-Infinity"), 0, false},
		{1e300, 0, false},
		{"3", 0, false},
		{true, 0, false},
		{bson.Null{}, 0, false},
		{bson.D{{Key: "n", Value: 3}}, 0, false},
	} {
		n, ok := bsonid.Int(val(t, tc.v))
		require.Equal(t, tc.ok, ok, "%T %v", tc.v, tc.v)
		require.Equal(t, tc.want, n, "%T %v", tc.v, tc.v)
	}
}

func TestText(t *testing.T) {
	oid := bson.NewObjectID()
	for id, want := range map[any]string{
		"kettle": `"kettle"`, 7: "7", int64(-3): "-3", 7.5: "7.5", oid: oid.Hex(), true: "true",
	} {
		require.Equal(t, want, bsonid.Text(id))
		require.Equal(t, want, bsonid.Text(val(t, id)), "the same from a RawValue")
	}
}
