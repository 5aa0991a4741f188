package seq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/seq"
)

// TestByID: pages in _id order across _ids of several types, each
// document once while every document read is rewritten (grown, so that a
// cursor would meet it again) before the next page, and the commands it
// sends: one find per page, plus one for the types after a bounded page
// that came back short.
func TestByID(t *testing.T) {
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
	for page, err := range seq.ByID(ctx, coll, filter, nil, 2) {
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
	// 1, 2 | 3.5 short | a, b | c short | objectIds | (no other
	// objectId) | true short.
	require.Equal(t, []int{2, 1, 2, 1, 2, 1}, sizes)
	require.Equal(t, []string{"find", "find", "find", "find", "find", "find", "find"}, finds(counter.Commands()))

	counter.Reset()
	n := 0
	for page, err := range seq.ByID(ctx, coll, bson.D{{Key: "k", Value: 2}}, bson.D{{Key: "k", Value: 1}}, 5) {
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

func TestAfterBeyond(t *testing.T) {
	f := bson.D{{Key: "k", Value: 1}}
	v := func(x any) bson.RawValue {
		typ, data, err := bson.MarshalValue(x)
		require.NoError(t, err)
		return bson.RawValue{Type: typ, Value: data}
	}
	require.Equal(t, bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: v(7)}}}}, seq.After(f, v(7)))
	notType := func(types ...any) bson.D {
		return bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: bson.A(types)}}}}
	}
	require.Equal(t, bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: notType("null", "number")}}, seq.Beyond(f, v(int64(7))))
	require.Equal(t, bson.D{{Key: "_id", Value: notType("null", "number", "string", "object", "binData", "objectId")}},
		seq.Beyond(nil, v(bson.ObjectID{1})))
	require.Len(t, f, 1, "the caller's filter is untouched")
}
