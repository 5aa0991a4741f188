package pagetoken_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/pagetoken"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestRoundTrip(t *testing.T) {
	text, err := pagetoken.Encode(bson.D{{Key: "s", Value: int64(3)}, {Key: "i", Value: "a/b+c"}})
	require.NoError(t, err)
	require.NotContains(t, string(text), "=", "unpadded")
	require.NotContains(t, string(text), "/", "URL-safe")
	vals, err := pagetoken.Decode(string(text), "s", "i")
	require.NoError(t, err)
	require.Equal(t, int64(3), vals[0].Int64())
	require.Equal(t, "a/b+c", vals[1].StringValue())
}

func TestDecodeRefuses(t *testing.T) {
	ok, err := pagetoken.Encode(bson.D{{Key: "s", Value: 1}, {Key: "i", Value: 2}})
	require.NoError(t, err)
	for _, tc := range []struct {
		text string
		keys []string
	}{
		{"!!", []string{"s", "i"}},                // not base64url
		{"AAAA", []string{"s", "i"}},              // not a document
		{string(ok), []string{"i", "s"}},          // other names
		{string(ok), []string{"s"}},               // more values
		{string(ok), []string{"s", "i", "extra"}}, // fewer values
	} {
		_, err := pagetoken.Decode(tc.text, tc.keys...)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%q %v", tc.text, tc.keys)
	}
}

// TestScope: one list, one scope, whatever the BSON type of an equal id;
// another id or other names, another scope.
func TestScope(t *testing.T) {
	val := func(v any) bson.RawValue {
		typ, data, err := bson.MarshalValue(v)
		require.NoError(t, err)
		return bson.RawValue{Type: typ, Value: data}
	}
	scope := pagetoken.Scope(val(int32(7)), "db", "posts")
	require.Len(t, scope, pagetoken.ScopeSize)
	require.Equal(t, scope, pagetoken.Scope(val(7.0), "db", "posts"), "7.0 is the parent 7")
	require.Equal(t, scope, pagetoken.Scope(val(int64(7)), "db", "posts"))
	for _, other := range [][]byte{
		pagetoken.Scope(val(8), "db", "posts"),
		pagetoken.Scope(val("7"), "db", "posts"),
		pagetoken.Scope(val(7), "db", "articles"),
		pagetoken.Scope(val(7), "db2", "posts"),
		pagetoken.Scope(val(7), "dbp", "osts"),
	} {
		require.NotEqual(t, scope, other)
	}
}
