package extref

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path, array, copy, inDocument string
	}{
		{"customer", "", "customer", "customer"},
		{"billing.customer", "", "billing.customer", "billing.customer"},
		{"items[].product", "items", "product", "items.product"},
		{"order.lines[].product.ref", "order.lines", "product.ref", "order.lines.product.ref"},
		{"authors[]", "authors", "", "authors"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			p, err := parsePath(tc.path)
			require.NoError(t, err)
			require.Equal(t, copyPath{array: tc.array, copy: tc.copy}, p)
			require.Equal(t, tc.inDocument, p.inDocument())
			require.Equal(t, tc.path, p.String())
		})
	}
}

func TestParsePathRejects(t *testing.T) {
	tests := []struct{ path, says string }{
		{"", "empty"},
		{"$customer", "operator"},
		{"customer.$id", "operator"},
		{"a..b", "empty"},
		{".a", "empty"},
		{"a.", "empty"},
		{"[]", "no array field"},
		{"[].product", "no array field"},
		{"items[]product", "followed by '.'"},
		{"items[].", "empty"},
		{"items[].$p", "operator"},
		{"items[].a[].b", "only one"},
		{"items[][]", "only one"},
		{"items[0].product", "'['"},
		{"items]", "'['"},
		{"it[ems[].p", "only one"},
		{"a\x00b", "NUL"},
		{"\xff", "UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, err := parsePath(tc.path)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.Contains(t, err.Error(), tc.says)
		})
	}
}

// FuzzParsePath checks that parsePath never panics, that what it accepts
// renders back to the same string, and that every path it derives is a
// valid MongoDB field path.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"customer", "items[].product", "authors[]", "a.b[].c.d", "[]", "a[][]", "a[].$b", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePath(s)
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			return
		}
		require.Equal(t, s, p.String())
		require.NoError(t, check.Path(p.inDocument()))
		require.NotContains(t, p.inDocument(), "[")
		if p.array != "" {
			require.NoError(t, check.Path(p.array))
			require.Equal(t, 1, strings.Count(s, "[]"))
		}
		if p.copy != "" {
			require.NoError(t, check.Path(p.copy))
		}
	})
}
