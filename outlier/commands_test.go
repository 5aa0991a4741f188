package outlier

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestCommands pins the documents the repository sends, the native ones
// included (they cannot run on FerretDB): a change to any of them is a
// change of behaviour and must show here.
func TestCommands(t *testing.T) {
	cfg := valid()
	cfg.ItemID = "cid"
	r, err := New[bson.Raw, bson.Raw](offline, cfg)
	require.NoError(t, err)
	a := item{raw: bson.Raw{5, 0, 0, 0, 0}, id: rawValue(t, "a")}
	b := item{raw: bson.Raw{6, 0, 0, 0, 10, 0}, id: rawValue(t, int32(2))}
	items := []item{a, b}
	E := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }

	require.Equal(t, bson.D{
		E("_id", 7),
		E("has_extra", bson.D{E("$ne", true)}),
		E("comments.48", bson.D{E("$exists", false)}),
		E("comments.cid", bson.D{E("$nin", bson.A{a.id, b.id})}),
	}, r.pushParentFilter(7, 48, items))
	require.Equal(t, bson.D{
		E("$push", bson.D{E("comments", bson.D{E("$each", bson.A{a.raw, b.raw})})}),
	}, r.pushParentUpdate(items))
	require.Equal(t, bson.D{E("has_extra", 1), E("extra_tail", 1), E("comments.cid", 1)}, r.parentStateProjection())
	require.Equal(t, bson.D{
		E("$set", bson.D{E("has_extra", true)}),
		E("$max", bson.D{E("extra_tail", int64(3))}),
	}, r.openUpdate(3))

	require.Equal(t, bson.D{E("$or", bson.A{
		bson.D{E("parent", 7), E("seq", bson.D{E("$gte", int64(2))})},
		bson.D{E("parent", 7), E("items.cid", bson.D{E("$in", bson.A{a.id, b.id})})},
	})}, r.overflowQuery(7, 2, items))
	require.Equal(t, bson.D{E("seq", 1), E("count", 1), E("bytes", 1), E("items.cid", 1)}, r.overflowQueryProjection())
	require.Equal(t, bson.D{
		E("parent", 7), E("seq", int64(4)),
		E("count", bson.D{E("$lte", int64(18))}),
		E("bytes", bson.D{E("$lte", int64(1000-30))}),
	}, r.pushOverflowFilter(7, 4, 2, 30, 1000))
	require.Equal(t, bson.D{
		E("$inc", bson.D{E("count", int64(2)), E("bytes", int64(30))}),
		E("$push", bson.D{E("items", bson.D{E("$each", bson.A{a.raw, b.raw})})}),
	}, pushOverflowUpdate(items, 30))

	require.Equal(t, mongo.Pipeline{
		bson.D{E("$match", bson.D{E("parent", 7)})},
		bson.D{E("$group", bson.D{E("_id", nil), E("n", bson.D{E("$sum", "$count")})})},
	}, countPipeline(7))

	filter, update := r.removeParentNative(7, "a")
	require.Equal(t, bson.D{E("_id", 7), E("comments.cid", "a")}, filter)
	require.Equal(t, bson.D{E("$pull", bson.D{E("comments", bson.D{E("cid", "a")})})}, update)
	filter, update = r.removeOverflowNative(7, "a")
	require.Equal(t, bson.D{E("parent", 7), E("items.cid", "a")}, filter)
	require.Equal(t, bson.D{
		E("$pull", bson.D{E("items", bson.D{E("cid", "a")})}),
		E("$inc", bson.D{E("count", int64(-1))}),
	}, update)
	elems := bson.A{a.raw}
	filter, update = r.removeParentPortable(7, "a", elems)
	require.Equal(t, bson.D{E("_id", 7), E("comments.cid", "a")}, filter)
	require.Equal(t, bson.D{E("$pullAll", bson.D{E("comments", elems)})}, update)
	filter, update = r.removeOverflowPortable("doc", "a", elems)
	require.Equal(t, bson.D{E("_id", "doc"), E("items.cid", "a")}, filter)
	require.Equal(t, bson.D{
		E("$pullAll", bson.D{E("items", elems)}),
		E("$inc", bson.D{E("count", int64(-1))}),
	}, update)

	ix := r.Indexes()
	require.Len(t, ix, 2)
	require.Equal(t, "posts_overflow", ix[0].Collection.Name())
	require.Equal(t, bson.D{E("parent", 1), E("seq", 1)}, ix[0].Model.Keys)
	var io options.IndexOptions
	for _, set := range ix[0].Model.Options.List() {
		require.NoError(t, set(&io))
	}
	require.True(t, *io.Unique)
	require.Equal(t, bson.D{E("parent", 1), E("items.cid", 1)}, ix[1].Model.Keys)
	require.Nil(t, ix[1].Model.Options)
}

func TestSameKey(t *testing.T) {
	want := bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: 1}}
	for _, tc := range []struct {
		key  bson.D
		same bool
	}{
		{bson.D{{Key: "parent", Value: int32(1)}, {Key: "seq", Value: int32(1)}}, true},
		{bson.D{{Key: "parent", Value: 1.0}, {Key: "seq", Value: int64(1)}}, true},
		{bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: -1}}, false},
		{bson.D{{Key: "seq", Value: 1}, {Key: "parent", Value: 1}}, false},
		{bson.D{{Key: "parent", Value: 1}}, false},
		{bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: "hashed"}}, false},
	} {
		raw, err := bson.Marshal(tc.key)
		require.NoError(t, err)
		require.Equal(t, tc.same, sameKey(raw, want), "%v", tc.key)
	}
}
