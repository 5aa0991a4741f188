package extref

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// null is BSON null.
var null = bson.RawValue{Type: bson.TypeNull}

// val encodes a Go value as a RawValue; missing is the zero RawValue.
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

// TestMatches pins the equality that Verify and the portable path use:
// it must agree with what MongoDB's {field: {$ne: want}} filter selects.
func TestMatches(t *testing.T) {
	var missing bson.RawValue
	tests := []struct {
		name         string
		stored, want bson.RawValue
		equal        bool
	}{
		{"same string", val(t, "Ann"), val(t, "Ann"), true},
		{"other string", val(t, "Ann"), val(t, "ann"), false},
		{"int32 and int64", val(t, int32(7)), val(t, int64(7)), true},
		{"int64 and double", val(t, int64(7)), val(t, 7.0), true},
		{"double fraction", val(t, 7.5), val(t, int64(7)), false},
		{"decimal scale", val(t, dec(t, "1.50")), val(t, 1.5), true},
		{"decimal integer", val(t, dec(t, "7E2")), val(t, int32(700)), true},
		{"decimal other", val(t, dec(t, "0.1")), val(t, 0.1), false}, // 0.1 is not exact in binary
		{"negative zero", val(t, math.Copysign(0, -1)), val(t, int32(0)), true},
		{"NaN equals NaN", val(t, math.NaN()), val(t, dec(t, "NaN")), true},
		{"infinities", val(t, math.Inf(1)), val(t, dec(t, "Infinity")), true},
		{"opposite infinities", val(t, math.Inf(1)), val(t, math.Inf(-1)), false},
		{"big int64 is not its rounded double", val(t, int64(1<<62+1)), val(t, float64(1<<62)), false},
		{"number and string", val(t, int32(1)), val(t, "1"), false},
		{"missing equals null", missing, null, true},
		{"missing is not a string", missing, val(t, "Ann"), false},
		{"bool", val(t, true), val(t, true), true},
		{"document in order", val(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: int64(2)}}), val(t, bson.D{{Key: "a", Value: 1.0}, {Key: "b", Value: 2}}), true},
		{"document out of order", val(t, bson.D{{Key: "b", Value: 2}, {Key: "a", Value: 1}}), val(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}), false},
		{"document with an extra field", val(t, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}), val(t, bson.D{{Key: "a", Value: 1}}), false},
		{"array", val(t, bson.A{1, "x"}), val(t, bson.A{int64(1), "x"}), true},
		{"array order", val(t, bson.A{"x", 1}), val(t, bson.A{1, "x"}), false},
		{"array holding the value", val(t, bson.A{"a", "b"}), val(t, "b"), true},
		{"array holding the array", val(t, bson.A{bson.A{1}, 2}), val(t, bson.A{1}), true},
		{"array not holding the value", val(t, bson.A{"a", "b"}), val(t, "c"), false},
		{"object ids", val(t, bson.ObjectID{1}), val(t, bson.ObjectID{1}), true},
		{"other object ids", val(t, bson.ObjectID{1}), val(t, bson.ObjectID{2}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.equal, matches(tc.stored, tc.want))
			require.Equal(t, !tc.equal, stale(tc.stored, tc.want))
		})
	}
}

func TestStaleOmittedField(t *testing.T) {
	var omitted bson.RawValue
	require.False(t, stale(bson.RawValue{}, omitted), "an omitted field that is absent is fresh")
	require.True(t, stale(val(t, ""), omitted), "an omitted field that is present is stale, even empty")
	require.True(t, stale(null, omitted), "even null: {$exists: true} selects it")
}
