package extref

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
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

// staleCase is a stored value, the value a source gives it, and whether
// they are equal.
type staleCase struct {
	name         string
	stored, want bson.RawValue
	equal        bool
}

// staleCases are the comparisons that TestStale pins in Go and
// TestStaleClausesAgreeWithTheServer on the server.
func staleCases(t testing.TB) []staleCase {
	var missing bson.RawValue
	return []staleCase{
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
		{"array holding the value", val(t, bson.A{"a", "b"}), val(t, "b"), false},
		{"array of the value", val(t, bson.A{"a"}), val(t, "a"), false},
		{"value of the array", val(t, "a"), val(t, bson.A{"a"}), false},
		{"array holding the array", val(t, bson.A{bson.A{1}, 2}), val(t, bson.A{1}), false},
		{"array holding the array as long", val(t, bson.A{bson.A{1, 2}, 3}), val(t, bson.A{1, 2}), false},
		{"arrays in arrays", val(t, bson.A{bson.A{1, int64(2)}, "x"}), val(t, bson.A{bson.A{1.0, 2}, "x"}), true},
		{"array holding the document", val(t, bson.A{bson.D{{Key: "a", Value: 1}}}), val(t, bson.D{{Key: "a", Value: 1}}), false},
		{"array holding null", val(t, bson.A{nil}), null, false},
		{"empty array", val(t, bson.A{}), val(t, bson.A{}), true},
		{"empty array is not missing", missing, val(t, bson.A{}), false},
		{"array not holding the value", val(t, bson.A{"a", "b"}), val(t, "c"), false},
		{"object ids", val(t, bson.ObjectID{1}), val(t, bson.ObjectID{1}), true},
		{"other object ids", val(t, bson.ObjectID{1}), val(t, bson.ObjectID{2}), false},
	}
}

// TestStale pins the equality that Verify and the portable path use, whole
// values, numbers by value.
func TestStale(t *testing.T) {
	for _, tc := range staleCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, !tc.equal, stale(tc.stored, tc.want))
		})
	}
}

// TestStaleClausesAgreeWithTheServer: the clauses of Sync's filters
// select, on the server, exactly the values that stale finds stale in Go,
// at the top of a document and, where the server's plan syncs array
// targets with arrayFilters, inside $elemMatch (FerretDB 1.x has no
// $elemMatch on element fields: its portable path compares in Go). Before
// whole values were compared, {tag: {$ne: "a"}} missed the copy ["a", "b"]
// on every server, and Sync could never repair it.
func TestStaleClausesAgreeWithTheServer(t *testing.T) {
	coll := mongotest.DB(t).Collection("values")
	elemMatch := planFor(mongotest.Server()).arrayFilters
	for i, tc := range staleCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			top, elem := bson.D{{Key: "_id", Value: i}}, bson.D{}
			if tc.stored.Type != 0 {
				top = append(top, bson.E{Key: "v", Value: tc.stored})
				elem = bson.D{{Key: "v", Value: tc.stored}}
			}
			top = append(top, bson.E{Key: "a", Value: bson.A{bson.D{{Key: "x", Value: 1}}, elem}})
			if _, err := coll.InsertOne(t.Context(), top); err != nil {
				t.Skipf("skipped: the server does not store %s: %v", tc.stored, err)
			}
			or := staleClauses(nil, "v", tc.want)
			filters := []bson.D{{{Key: "_id", Value: i}, {Key: "$or", Value: or}}}
			if elemMatch {
				filters = append(filters, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$exists", Value: false}}}, {Key: "$or", Value: or}}}}}})
			}
			for _, filter := range filters {
				n, err := coll.CountDocuments(t.Context(), filter)
				require.NoError(t, err)
				require.Equal(t, !tc.equal, n == 1, "%v", filter)
			}
		})
	}
}

// TestStaleClauses pins the clauses of an array that holds an array.
func TestStaleClauses(t *testing.T) {
	exists := func(path string, b bool) bson.D {
		return bson.D{{Key: path, Value: bson.D{{Key: "$exists", Value: b}}}}
	}
	notArray := func(path string) bson.D {
		return bson.D{{Key: path, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}}}
	}
	requireBSON(t, bson.A{
		notArray("t"), exists("t.2", true), exists("t.1", false),
		bson.D{{Key: "t.0", Value: bson.D{{Key: "$ne", Value: "a"}}}},
		bson.D{{Key: "t.0", Value: bson.D{{Key: "$type", Value: "array"}}}},
		notArray("t.1"), exists("t.1.1", true), exists("t.1.0", false),
		bson.D{{Key: "t.1.0", Value: bson.D{{Key: "$ne", Value: "b"}}}},
		bson.D{{Key: "t.1.0", Value: bson.D{{Key: "$type", Value: "array"}}}},
		notArray("e"), exists("e.0", true),
		exists("u", true),
	}, staleClauses(staleClauses(staleClauses(nil, "t", val(t, bson.A{"a", bson.A{"b"}})), "e", val(t, bson.A{})), "u", bson.RawValue{}))
}

func TestStaleOmittedField(t *testing.T) {
	var omitted bson.RawValue
	require.False(t, stale(bson.RawValue{}, omitted), "an omitted field that is absent is fresh")
	require.True(t, stale(val(t, ""), omitted), "an omitted field that is present is stale, even empty")
	require.True(t, stale(null, omitted), "even null: {$exists: true} selects it")
}
