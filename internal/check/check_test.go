package check_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestFieldAndPath(t *testing.T) {
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
			ok := func(err error, ok bool) {
				if ok {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, patterns.ErrInvalid)
			}
			ok(check.Field(tc.in), tc.field)
			ok(check.Path(tc.in), tc.path)
		})
	}
}

func TestMessages(t *testing.T) {
	require.EqualError(t, check.Field("$set"), `field name "$set" starts with '$', which makes it an operator: invalid`)
	require.EqualError(t, check.Path("a..b"), `field path "a..b": segment 2 is empty: invalid`)
	require.EqualError(t, check.Collection("system.users"), `collection name "system.users" is in the server's system namespace: invalid`)
}

func TestCollection(t *testing.T) {
	for _, ok := range []string{"orders", "orders.archive", "a-b_c", "größe", "systemic"} {
		require.NoError(t, check.Collection(ok), ok)
	}
	for _, bad := range []string{"", "a$b", "$cmd", "a\x00b", "system.users", "\xff"} {
		require.ErrorIs(t, check.Collection(bad), patterns.ErrInvalid, "%q", bad)
	}
}

// FuzzPath checks the validators against their definition: a path is
// accepted exactly when every dot-separated segment is a non-empty,
// NUL-free, valid UTF-8 string not starting with '$'; a field is accepted
// exactly when it is an accepted path without a dot. Every rejection wraps
// ErrInvalid, and an accepted path encodes as a BSON key.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"a", "a.b", "", ".", "a..b", "$a", "a.$b", "a\x00", "\xff", "items.0.name", "größe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s) && s != ""
		for _, seg := range strings.Split(s, ".") {
			want = want && seg != "" && !strings.HasPrefix(seg, "$") && !strings.Contains(seg, "\x00")
		}
		pathErr := check.Path(s)
		if (pathErr == nil) != want {
			t.Fatalf("Path(%q) = %v, want valid=%v", s, pathErr, want)
		}
		if pathErr != nil && !errors.Is(pathErr, patterns.ErrInvalid) {
			t.Fatalf("Path(%q) error %v does not wrap ErrInvalid", s, pathErr)
		}
		fieldErr := check.Field(s)
		if wantField := want && !strings.Contains(s, "."); (fieldErr == nil) != wantField {
			t.Fatalf("Field(%q) = %v, want valid=%v", s, fieldErr, wantField)
		}
		if fieldErr != nil && !errors.Is(fieldErr, patterns.ErrInvalid) {
			t.Fatalf("Field(%q) error %v does not wrap ErrInvalid", s, fieldErr)
		}
		if pathErr == nil {
			if _, err := bson.Marshal(bson.D{{Key: s, Value: 1}}); err != nil {
				t.Fatalf("accepted path %q does not encode: %v", s, err)
			}
		}
	})
}
