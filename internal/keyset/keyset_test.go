package keyset_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func raw(t *testing.T, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

func TestAfterIsPinned(t *testing.T) {
	for _, tt := range []struct {
		last any
		want string
	}{
		{bson.Null{}, `{"$or":[{"_id":{"$gt":null}},{"_id":{"$type":["number","string","object","binData","objectId","bool","date","timestamp"]}}]}`},
		{int64(7), `{"$or":[{"_id":{"$gt":7}},{"_id":{"$type":["string","object","binData","objectId","bool","date","timestamp"]}}]}`},
		{"u1", `{"$or":[{"_id":{"$gt":"u1"}},{"_id":{"$type":["object","binData","objectId","bool","date","timestamp"]}}]}`},
		{true, `{"$or":[{"_id":{"$gt":true}},{"_id":{"$type":["date","timestamp"]}}]}`},
		{bson.Timestamp{T: 1, I: 2}, `{"_id":{"$gt":{"$timestamp":{"t":1,"i":2}}}}`},
	} {
		f, err := keyset.After(raw(t, tt.last))
		require.NoError(t, err)
		got, err := bson.MarshalExtJSON(f, false, false)
		require.NoError(t, err)
		require.Equal(t, tt.want, string(got))
	}
	_, err := keyset.After(raw(t, bson.MaxKey{}))
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.ErrorContains(t, err, "an _id of BSON type")
}
