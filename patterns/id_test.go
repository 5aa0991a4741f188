package patterns_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestValidateID(t *testing.T) {
	oid := bson.NewObjectID()
	type userStruct struct{ ID string }
	tests := []struct {
		name string
		id   any
		ok   bool
	}{
		{"ObjectID", oid, true},
		{"string", "sku-1", true},
		{"int", 42, true},
		{"negative int64", int64(-7), true},
		{"float", 1.5, true},
		{"bytes", []byte{1, 2}, true},
		{"binary", bson.Binary{Subtype: 4, Data: make([]byte, 16)}, true},
		{"time", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"decimal", bson.NewDecimal128(1, 1), true},
		{"nil", nil, false},
		{"empty string", "", false},
		{"zero int", 0, false},
		{"zero ObjectID", bson.ObjectID{}, false},
		{"NaN", math.NaN(), false},
		{"operator injection bson.M", bson.M{"$ne": nil}, false},
		{"operator injection map", map[string]any{"$gt": ""}, false},
		{"bson.D", bson.D{{Key: "$exists", Value: true}}, false},
		{"bson.Raw document", bson.Raw(mustMarshal(t, bson.D{{Key: "$ne", Value: 1}})), false},
		{"struct", userStruct{ID: "x"}, false},
		{"array", []int{1, 2}, false},
		{"bson.A", bson.A{1}, false},
		{"regex", bson.Regex{Pattern: ".*"}, false},
		{"JavaScript", bson.JavaScript("1"), false},
		{"unencodable", make(chan int), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := patterns.ValidateID(tc.id)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
	}
}

func mustMarshal(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

// FuzzValidateID checks that no string or number id is ever taken for a
// document, and that strings are rejected only when empty.
func FuzzValidateID(f *testing.F) {
	f.Add("", int64(0), 0.0)
	f.Add("x", int64(1), 1.5)
	f.Fuzz(func(t *testing.T, s string, n int64, x float64) {
		if err := patterns.ValidateID(s); (err == nil) != (s != "") {
			t.Fatalf("ValidateID(%q) = %v", s, err)
		}
		if err := patterns.ValidateID(n); (err == nil) != (n != 0) {
			t.Fatalf("ValidateID(%d) = %v", n, err)
		}
		if err := patterns.ValidateID(x); (err == nil) != (x != 0 && !math.IsNaN(x)) {
			t.Fatalf("ValidateID(%v) = %v", x, err)
		}
	})
}

func TestValidateIDOfCommonIDsDoesNotAllocate(t *testing.T) {
	oid := bson.NewObjectID()
	for _, id := range []any{"sku-1", oid, 42, int32(7), int64(-9)} {
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = patterns.ValidateID(id) }), "%T", id)
	}
}

// TestValidateIDByClass: every generated value, as an encoded value
// (bson.RawValue), is refused with ErrInvalid exactly when ValidateID's
// godoc says: missing (nil), a zero (a number equal to 0, -0 included,
// whatever its type; the empty string; false), NaN (double or decimal),
// a document or an array, null, undefined, MinKey, MaxKey, a regular
// expression, JavaScript with or without scope, a DBPointer. Infinities,
// integers past 2^53, decimals past float64, symbols, binary data,
// ObjectIDs, true, dates and timestamps are ids.
func TestValidateIDByClass(t *testing.T) {
	refusedClasses := map[bsonkinds.Class]bool{
		bsonkinds.MinKey: true, bsonkinds.Undefined: true, bsonkinds.Null: true, bsonkinds.Object: true, bsonkinds.Array: true,
		bsonkinds.Regex: true, bsonkinds.DBPointer: true, bsonkinds.JavaScript: true, bsonkinds.JavaScriptWithScope: true, bsonkinds.MaxKey: true,
	}
	refusedValues := map[string]bool{
		"double NaN": true, "decimal NaN": true,
		"double -0": true, "int32 0": true, "double 0": true, "decimal 0": true,
		"false": true,
	}
	for _, v := range bsonkinds.All() {
		err := patterns.ValidateID(v.V)
		if refusedClasses[v.Class] || refusedValues[v.Name] {
			require.ErrorIs(t, err, patterns.ErrInvalid, v.Name)
			continue
		}
		require.NoError(t, err, v.Name)
	}
}
