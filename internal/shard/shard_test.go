package shard

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func key(d bson.D) Key { return MustParseKey(d) }

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

func TestParseKey(t *testing.T) {
	k, err := ParseKey(bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: int32(1)}})
	require.NoError(t, err)
	require.Equal(t, Key{{Path: "meta"}, {Path: "start"}}, k)
	require.Equal(t, `{"meta": 1, "start": 1}`, k.String())
	k, err = ParseKey(bson.D{{Key: "_id", Value: "hashed"}})
	require.NoError(t, err)
	require.Equal(t, Key{{Path: "_id", Hashed: true}}, k)
	for _, bad := range []bson.D{
		nil,
		{{Key: "a", Value: -1}},
		{{Key: "a", Value: "text"}},
		{{Key: "a", Value: "hashed"}, {Key: "b", Value: "hashed"}},
		{{Key: "a", Value: 1}, {Key: "a", Value: 1}},
		{{Key: "$a", Value: 1}},
	} {
		_, err := ParseKey(bad)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%v", bad)
	}
}

func TestFilter(t *testing.T) {
	ranged := key(bson.D{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: 1}})
	hashed := key(bson.D{{Key: "deviceId", Value: "hashed"}})
	for _, tc := range []struct {
		k      Key
		filter bson.D
		want   Target
	}{
		{ranged, bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: 3}}, OneShard},
		{ranged, bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "customerId", Value: 7}}, bson.D{{Key: "createdAt", Value: bson.D{{Key: "$eq", Value: 3}}}}}}}, OneShard},
		{ranged, bson.D{{Key: "customerId", Value: 7}}, SomeShards},
		{ranged, bson.D{{Key: "customerId", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}, {Key: "createdAt", Value: 3}}, SomeShards},
		{ranged, bson.D{{Key: "customerId", Value: bson.D{{Key: "$in", Value: bson.A{1}}}}, {Key: "createdAt", Value: 3}}, OneShard},
		{ranged, bson.D{{Key: "customerId", Value: bson.D{{Key: "$gt", Value: 7}}}}, SomeShards},
		{ranged, bson.D{{Key: "createdAt", Value: 3}}, EveryShard},
		{ranged, bson.D{{Key: "_id", Value: 3}}, EveryShard},
		{ranged, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "customerId", Value: 7}}}}}, SomeShards},
		{ranged, bson.D{{Key: "customerId", Value: bson.A{1, 2}}, {Key: "createdAt", Value: 3}}, EveryShard},
		{hashed, bson.D{{Key: "deviceId", Value: "d1"}}, OneShard},
		{ranged, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: bson.D{{Key: "$eq", Value: 3}}}},
			bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: 3}, {Key: "x", Value: 1}},
		}}}, OneShard},
		{ranged, bson.D{{Key: "customerId", Value: 7}, {Key: "$or", Value: bson.A{bson.D{{Key: "createdAt", Value: 3}}, bson.D{{Key: "createdAt", Value: 3}, {Key: "y", Value: 2}}}}}, OneShard},
		{ranged, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: 3}}, bson.D{{Key: "customerId", Value: 8}, {Key: "createdAt", Value: 3}}}}}, SomeShards},
		{ranged, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "customerId", Value: 7}}, bson.D{{Key: "name", Value: "x"}}}}}, EveryShard},
		{hashed, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "deviceId", Value: "d1"}, {Key: "a", Value: 1}}, bson.D{{Key: "deviceId", Value: "d1"}, {Key: "b", Value: 1}}}}}, OneShard},
		{hashed, bson.D{{Key: "deviceId", Value: bson.D{{Key: "$gte", Value: "d"}}}}, EveryShard},
		{hashed, bson.D{{Key: "deviceId", Value: bson.Regex{Pattern: "^d"}}}, EveryShard},
	} {
		got := tc.k.Filter(tc.filter)
		require.Equal(t, tc.want, got.Target, "%v on %v: %s", tc.filter, tc.k, got.Why)
	}
}

func TestRoute(t *testing.T) {
	v := func(major, minor int) patterns.Version { return patterns.Version{Major: major, Minor: minor} }
	orders := key(bson.D{{Key: "customerId", Value: 1}})
	idHashed := key(bson.D{{Key: "_id", Value: "hashed"}})
	c6 := Cluster{Version: v(6, 0), Keys: map[string]Key{"orders": orders, "h": idHashed}}
	c8 := Cluster{Version: v(8, 0), Keys: c6.Keys}
	c50 := Cluster{Version: v(5, 0), Keys: c6.Keys}
	byID := bson.D{{Key: "_id", Value: 1}}
	byKey := bson.D{{Key: "customerId", Value: 7}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "x"}}}}
	for _, tc := range []struct {
		name string
		c    Cluster
		cmd  bson.D
		want Target
		code int32
	}{
		{"findAndModify by _id, 6.0", c6, bson.D{{Key: "findAndModify", Value: "orders"}, {Key: "query", Value: byID}, {Key: "update", Value: set}}, Refused, 61},
		{"findAndModify by _id, 8.0", c8, bson.D{{Key: "findAndModify", Value: "orders"}, {Key: "query", Value: byID}, {Key: "update", Value: set}}, EveryShard, 0},
		{"findAndModify by key", c6, bson.D{{Key: "findAndModify", Value: "orders"}, {Key: "query", Value: byKey}, {Key: "update", Value: set}}, OneShard, 0},
		{"findAndModify by _id on hashed _id", c6, bson.D{{Key: "findAndModify", Value: "h"}, {Key: "query", Value: byID}, {Key: "remove", Value: true}}, OneShard, 0},
		{"findAndModify on unsharded", c6, bson.D{{Key: "findAndModify", Value: "other"}, {Key: "query", Value: byID}}, OneShard, 0},
		{"updateOne by _id, 6.0", c6, upd("orders", byID, set, false, false), EveryShard, 0},
		{"updateOne by other field, 6.0", c6, upd("orders", bson.D{{Key: "name", Value: "x"}}, set, false, false), Refused, 72},
		{"updateOne by other field, 8.0", c8, upd("orders", bson.D{{Key: "name", Value: "x"}}, set, false, false), EveryShard, 0},
		{"updateOne by key", c6, upd("orders", byKey, set, false, false), OneShard, 0},
		{"replaceOne by _id with the key in the replacement", c6, upd("orders", byID, bson.D{{Key: "customerId", Value: 7}, {Key: "n", Value: 1}}, false, false), OneShard, 0},
		{"upsert by _id, 6.0", c6, upd("orders", byID, set, false, true), Refused, 61},
		{"upsert by _id, 8.0", c8, upd("orders", byID, set, false, true), EveryShard, 0},
		{"multi upsert by _id, 8.0", c8, upd("orders", byID, set, true, true), Refused, 61},
		{"upsert by key", c6, upd("orders", byKey, set, false, true), OneShard, 0},
		{"updateMany by other field", c6, upd("orders", bson.D{{Key: "name", Value: "x"}}, set, true, false), EveryShard, 0},
		{"updateMany by key", c6, upd("orders", byKey, set, true, false), OneShard, 0},
		{"key change without the key", c8, upd("orders", byID, bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}, false, false), Refused, 31025},
		{"key change in a multi-update", c8, upd("orders", byKey, bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}, true, false), Refused, 72},
		{"key change with the key", c6, upd("orders", byKey, bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}, false, false), OneShard, 0},
		{"pipeline key change without the key", c8, upd("orders", byID, bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}}, false, false), Refused, 31025},
		{"deleteOne by _id, 6.0", c6, bson.D{{Key: "delete", Value: "orders"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: byID}, {Key: "limit", Value: 1}}}}}, EveryShard, 0},
		{"deleteOne by other, 6.0", c6, bson.D{{Key: "delete", Value: "orders"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "limit", Value: 1}}}}}, Refused, 61},
		{"deleteMany by other", c6, bson.D{{Key: "delete", Value: "orders"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "limit", Value: 0}}}}}, EveryShard, 0},
		{"unique index not prefixed", c6, bson.D{{Key: "createIndexes", Value: "orders"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "name", Value: "email_1"}, {Key: "unique", Value: true}}}}}, Refused, 67},
		{"unique index prefixed", c6, bson.D{{Key: "createIndexes", Value: "orders"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "customerId", Value: 1}, {Key: "seq", Value: 1}}}, {Key: "name", Value: "c"}, {Key: "unique", Value: true}}}}}, OneShard, 0},
		{"find by key", c6, bson.D{{Key: "find", Value: "orders"}, {Key: "filter", Value: byKey}}, OneShard, 0},
		{"find by _id", c6, bson.D{{Key: "find", Value: "orders"}, {Key: "filter", Value: byID}}, EveryShard, 0},
		{"aggregate with a first $match", c6, bson.D{{Key: "aggregate", Value: "orders"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: byKey}}}}}, OneShard, 0},
		{"aggregate without $match", c6, bson.D{{Key: "aggregate", Value: "orders"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}}}, EveryShard, 0},
		{"$lookup from sharded, 5.0", c50, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "orders"}}}}}}}, Refused, 28769},
		{"$lookup from sharded, 6.0", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "orders"}}}}}}}, OneShard, 0},
		{"$out to sharded", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "orders"}}}}}, Refused, 28769},
		{"$merge on _id into sharded", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "orders"}}}}}}}, Refused, 51190},
		{"$merge on the key", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "orders"}, {Key: "on", Value: bson.A{"customerId", "_id"}}}}}}}}, OneShard, 0},
		{"insert of several with one key", c6, bson.D{{Key: "insert", Value: "orders"}, {Key: "documents", Value: bson.A{byKey, byKey}}}, OneShard, 0},
		{"insert of several keys", c6, bson.D{{Key: "insert", Value: "orders"}, {Key: "documents", Value: bson.A{byKey, bson.D{{Key: "customerId", Value: 8}}}}}, SomeShards, 0},
		{"insert of several on hashed _id", c6, bson.D{{Key: "insert", Value: "h"}, {Key: "documents", Value: bson.A{byID, bson.D{{Key: "_id", Value: 2}}}}}, SomeShards, 0},
		{"insert with a dotted key", Cluster{Version: v(6, 0), Keys: map[string]Key{"d": key(bson.D{{Key: "m.a", Value: 1}})}}, bson.D{{Key: "insert", Value: "d"}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: 1}, {Key: "m", Value: bson.D{{Key: "a", Value: 1}}}},
			bson.D{{Key: "_id", Value: 2}, {Key: "m", Value: bson.D{{Key: "a", Value: 2}}}},
		}}}, SomeShards, 0},
		{"getMore", c6, bson.D{{Key: "getMore", Value: int64(1)}, {Key: "collection", Value: "orders"}}, OneShard, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Route(raw(t, tc.cmd))
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Target, got.String())
			require.Equal(t, tc.code, got.Code, got.String())
			require.NotEmpty(t, got.Why)
		})
	}
}

func upd(coll string, q bson.D, u any, multi, upsert bool) bson.D {
	return bson.D{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: q}, {Key: "u", Value: u}, {Key: "multi", Value: multi}, {Key: "upsert", Value: upsert},
	}}}}
}

// TestCheckFields: the shard-key fields a Config names.
func TestCheckFields(t *testing.T) {
	require.NoError(t, CheckFields(nil))
	require.NoError(t, CheckFields([]string{"tenant", "geo.region"}))
	for _, tc := range []struct {
		fields []string
		want   string
	}{
		{[]string{"tenant", "_id"}, `"_id": every filter holds the _id already`},
		{[]string{"_id.part"}, `"_id.part": every filter holds the _id already`},
		{[]string{"tenant", "tenant"}, `"tenant" is given twice`},
		{[]string{"a..b"}, `a..b`},
		{[]string{"$a"}, `$a`},
	} {
		err := CheckFields(tc.fields)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%v", tc.fields)
		require.ErrorContains(t, err, tc.want)
	}
}

// TestAppendValues: each field's value in the document, by $eq; null for
// a missing one; a nested path read inside its document.
func TestAppendValues(t *testing.T) {
	doc := raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "tenant", Value: "acme"}, {Key: "geo", Value: bson.D{{Key: "region", Value: "eu"}}}})
	got := AppendValues(bson.D{{Key: "_id", Value: 1}}, doc, []string{"tenant", "geo.region", "missing"})
	want := raw(t, bson.D{
		{Key: "_id", Value: 1},
		{Key: "tenant", Value: bson.D{{Key: "$eq", Value: "acme"}}},
		{Key: "geo.region", Value: bson.D{{Key: "$eq", Value: "eu"}}},
		{Key: "missing", Value: bson.D{{Key: "$eq", Value: nil}}},
	})
	require.Equal(t, want.String(), raw(t, got).String())
	k := key(bson.D{{Key: "tenant", Value: 1}, {Key: "geo.region", Value: 1}, {Key: "missing", Value: 1}})
	require.Equal(t, OneShard, k.Filter(got).Target, "the filter carries the full key")
}
