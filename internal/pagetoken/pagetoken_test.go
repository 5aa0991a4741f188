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
