package patterns_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestValidateFieldAndPath(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		field, path bool // valid as a field, valid as a path
	}{
		{"plain", "name", true, true},
		{"camel case and digits", "createdAt2", true, true},
		{"unicode", "größe", true, true},
		{"dollar inside", "a$b", true, true},
		{"empty", "", false, false},
		{"leading dollar", "$set", false, false},
		{"dotted", "customer.name", false, true},
		{"numeric segment", "items.0.name", false, true},
		{"leading dot", ".a", false, false},
		{"trailing dot", "a.", false, false},
		{"double dot", "a..b", false, false},
		{"dollar segment", "a.$b", false, false},
		{"positional", "a.$.b", false, false},
		{"NUL", "a\x00b", false, false},
		{"invalid UTF-8", "a\xffb", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := func(err error, ok bool) {
				if ok {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, patterns.ErrInvalid)
			}
			check(patterns.ValidateField(tc.in), tc.field)
			check(patterns.ValidatePath(tc.in), tc.path)
		})
	}
}

func TestValidateCollection(t *testing.T) {
	for _, ok := range []string{"orders", "orders.archive", "a-b_c", "größe", "systemic"} {
		require.NoError(t, patterns.ValidateCollection(ok), ok)
	}
	for _, bad := range []string{"", "a$b", "$cmd", "a\x00b", "system.users", "\xff"} {
		require.ErrorIs(t, patterns.ValidateCollection(bad), patterns.ErrInvalid, "%q", bad)
	}
}

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

// FuzzValidatePath checks the validators against their definition: a path
// is accepted exactly when every dot-separated segment is a non-empty,
// NUL-free, valid UTF-8 string not starting with '$'; a field is accepted
// exactly when it is an accepted path without a dot. Every rejection wraps
// ErrInvalid, and an accepted path encodes as a BSON key.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a.b", "", ".", "a..b", "$a", "a.$b", "a\x00", "\xff", "items.0.name", "größe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s) && s != ""
		for _, seg := range strings.Split(s, ".") {
			want = want && seg != "" && !strings.HasPrefix(seg, "$") && !strings.Contains(seg, "\x00")
		}
		pathErr := patterns.ValidatePath(s)
		if (pathErr == nil) != want {
			t.Fatalf("ValidatePath(%q) = %v, want valid=%v", s, pathErr, want)
		}
		if pathErr != nil && !errors.Is(pathErr, patterns.ErrInvalid) {
			t.Fatalf("ValidatePath(%q) error %v does not wrap ErrInvalid", s, pathErr)
		}
		fieldErr := patterns.ValidateField(s)
		if wantField := want && !strings.Contains(s, "."); (fieldErr == nil) != wantField {
			t.Fatalf("ValidateField(%q) = %v, want valid=%v", s, fieldErr, wantField)
		}
		if fieldErr != nil && !errors.Is(fieldErr, patterns.ErrInvalid) {
			t.Fatalf("ValidateField(%q) error %v does not wrap ErrInvalid", s, fieldErr)
		}
		if pathErr == nil {
			if _, err := bson.Marshal(bson.D{{Key: s, Value: 1}}); err != nil {
				t.Fatalf("accepted path %q does not encode: %v", s, err)
			}
		}
	})
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
