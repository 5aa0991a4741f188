package bsonid_test

import (
	"math"
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
// width and integral doubles share a key.
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
