package keyset_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func raw(t *testing.T, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

func TestAfterIsPinned(t *testing.T) {
	common := `"object","binData","objectId","bool","date","timestamp"`
	tail := `"regex","dbPointer","javascript","javascriptWithScope","maxKey"`
	for _, tt := range []struct {
		last any
		all  bool
		want string
	}{
		{bson.Null{}, false, `{"$or":[{"_id":{"$gt":null}},{"_id":{"$gte":""}},{"_id":{"$type":["number",` + common + `]}}]}`},
		{int64(7), false, `{"$or":[{"_id":{"$gt":7}},{"_id":{"$gte":""}},{"_id":{"$type":[` + common + `]}}]}`},
		{int64(7), true, `{"$or":[{"_id":{"$gt":7}},{"_id":{"$gte":""}},{"_id":{"$type":[` + common + `,` + tail + `]}}]}`},
		// NaN: $gt finds no number; every other number is >= -Infinity.
		{math.NaN(), false, `{"$or":[{"_id":{"$gte":{"$numberDouble":"-Infinity"}}},{"_id":{"$gte":""}},{"_id":{"$type":[` + common + `]}}]}`},
		{dec(t, "NaN"), false, `{"$or":[{"_id":{"$gte":{"$numberDouble":"-Infinity"}}},{"_id":{"$gte":""}},{"_id":{"$type":[` + common + `]}}]}`},
		{"u1", false, `{"$or":[{"_id":{"$gt":"u1"}},{"_id":{"$type":[` + common + `]}}]}`},
		// A symbol: $gt reaches the strings and symbols after it.
		{bson.Symbol("u1"), true, `{"$or":[{"_id":{"$gt":{"$symbol":"u1"}}},{"_id":{"$type":[` + common + `,` + tail + `]}}]}`},
		{true, false, `{"$or":[{"_id":{"$gt":true}},{"_id":{"$type":["date","timestamp"]}}]}`},
		{bson.Timestamp{T: 1, I: 2}, false, `{"_id":{"$gt":{"$timestamp":{"t":1,"i":2}}}}`},
		{bson.Timestamp{T: 1, I: 2}, true, `{"$or":[{"_id":{"$gt":{"$timestamp":{"t":1,"i":2}}}},{"_id":{"$type":[` + tail + `]}}]}`},
		{bson.MinKey{}, true, `{"$or":[{"_id":{"$gte":""}},{"_id":{"$type":["undefined","null","number",` + common + `,` + tail + `]}}]}`},
		{bson.JavaScript("x"), true, `{"$or":[{"_id":{"$gt":{"$code":"x"}}},{"_id":{"$type":["javascriptWithScope","maxKey"]}}]}`},
		{bson.MaxKey{}, true, `{"_id":{"$in":[]}}`},
	} {
		f, err := keyset.After(raw(t, tt.last), tt.all)
		require.NoError(t, err)
		got, err := bson.MarshalExtJSON(f, false, false)
		require.NoError(t, err)
		require.Equal(t, tt.want, string(got), "%v", tt.last)
	}
	for _, last := range []any{bson.Regex{Pattern: "a"}, bson.Undefined{}, bson.A{1}} {
		_, err := keyset.After(raw(t, last), true)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorContains(t, err, "a scan in _id order cannot continue after")
	}
}

func dec(t *testing.T, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	require.NoError(t, err)
	return d
}

// TestPages: pages in _id order across _ids of several types, each
// document once while every document read is rewritten (grown, so that a
// cursor would meet it again) before the next page, and the commands it
// sends: one find per page, the types after the last _id in the same
// find, and after the short last page one of the greatest _id.
func TestPages(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("c")
	ids := []any{int32(1), int64(2), 3.5, "a", "b", "c", bson.ObjectID{1}, bson.ObjectID{2}, true}
	for _, id := range ids {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "k", Value: 1}})
		require.NoError(t, err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "skipped"}, {Key: "k", Value: 2}})
	require.NoError(t, err)
	filter := bson.D{{Key: "k", Value: 1}}

	counter := mongotest.NewCounter(t, db)
	var got []string
	var sizes []int
	for page, err := range keyset.Pages(ctx, coll, filter, 2, 0) {
		require.NoError(t, err)
		sizes = append(sizes, len(page))
		for _, doc := range page {
			id := doc.Lookup("_id")
			got = append(got, id.String())
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "pad", Value: string(make([]byte, 4096))}}}})
			require.NoError(t, err)
		}
	}
	var want []string
	for _, id := range ids {
		typ, data, err := bson.MarshalValue(id)
		require.NoError(t, err)
		want = append(want, bson.RawValue{Type: typ, Value: data}.String())
	}
	require.Equal(t, want, got, "each once, in MongoDB's order")
	// 1, 2 | 3.5, a | b, c | objectIds | true, short.
	require.Equal(t, []int{2, 2, 2, 2, 1}, sizes)
	require.Equal(t, []string{"find", "find", "find", "find", "find", "find"}, finds(counter.Commands()), "5 pages, then the greatest _id")

	counter.Reset()
	n := 0
	for page, err := range keyset.Pages(ctx, coll, bson.D{{Key: "k", Value: 2}}, 5, 0, options.Find().SetProjection(bson.D{{Key: "k", Value: 1}})) {
		require.NoError(t, err)
		require.Equal(t, `{"_id": "skipped","k": {"$numberInt":"2"}}`, page[0].String())
		n += len(page)
	}
	require.Equal(t, 1, n)
	require.Equal(t, []string{"find"}, counter.Commands(), "a short first page is the whole scan")
}

// finds returns the finds among the commands.
func finds(commands []string) []string {
	var out []string
	for _, c := range commands {
		if c == "find" {
			out = append(out, c)
		}
	}
	return out
}
