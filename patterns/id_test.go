package patterns_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

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
