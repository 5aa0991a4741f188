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

func TestText(t *testing.T) {
	oid := bson.NewObjectID()
	for id, want := range map[any]string{
		"kettle": `"kettle"`, 7: "7", int64(-3): "-3", 7.5: "7.5", oid: oid.Hex(), true: "true",
	} {
		require.Equal(t, want, bsonid.Text(id))
		require.Equal(t, want, bsonid.Text(val(t, id)), "the same from a RawValue")
	}
}
