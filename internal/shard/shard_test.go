package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func key(d bson.D) Key { return MustParseKey(d) }

// The sources of the routing rules: the manual's pages, and the server's
// own targeting code and tests (mongodb/mongo, read, not copied).
const (
	srcQuery               = "mongodb/mongo src/mongo/s/chunk_manager_query_test.cpp (EqualityRange*, SetRange*, GTRange*, OrEqualities, CollationStrings/Numbers*)"
	srcBounds              = "mongodb/mongo src/mongo/s/shard_key_pattern_query_util_index_bounds_test.cpp (AllValue, NegativeGT, Regex, HashedRange, ArrayEquality)"
	srcTargeter            = "mongodb/mongo src/mongo/s/collection_routing_info_targeter.cpp (targetUpdate, targetDelete, targetInsert, isExactIdQuery); 4.4's src/mongo/s/write_ops/chunk_manager_targeter.cpp alike"
	srcReplacement         = "mongodb/mongo collection_routing_info_targeter.cpp targetUpdate: a replacement not targeted by its query is targeted by the replacement document (emplaceMissingShardKeyValuesForDocument: missing fields as null; _id from an exact _id of the query), without the feature flag or with an exact _id"
	srcHashedCollation     = "mongodb/mongo src/mongo/s/chunk_manager.cpp findIntersectingChunk (a hashed field under a non-simple collation throws ShardKeyNotFound unless bypassIsFieldHashedCheck, which only cluster_find_and_modify_cmd.cpp passes); shard_key_pattern_query_util.cpp then takes the bounds under a null collator"
	srcFCV                 = "mongodb/mongo collection_routing_info_targeter.cpp: gFeatureFlagUpdateOneWithoutShardKey.isEnabled(featureCompatibility) gates the writes without the shard key"
	srcFindAndModify       = "https://www.mongodb.com/docs/manual/reference/command/findAndModify/#sharded-collections"
	srcKeyChange           = "https://www.mongodb.com/docs/manual/core/sharding-change-shard-key-value/"
	srcUnique              = "mongodb/mongo src/mongo/s/shard_key_pattern.h (isUniqueIndexCompatible: a unique index starting with _id suits every key; else prefixed by the key)"
	srcLookup              = "https://www.mongodb.com/docs/manual/reference/operator/aggregation/lookup/#sharded-collections"
	srcOut                 = "https://www.mongodb.com/docs/manual/reference/operator/aggregation/out/ (cannot output to a sharded collection)"
	srcMerge               = "https://www.mongodb.com/docs/manual/reference/operator/aggregation/merge/#std-label-merge-on (on defaults to the shard key and _id; an explicit on holds every key field)"
	srcGetMore             = "a getMore goes to the cursor's shards, which its find chose"
	srcExtract             = "mongodb/mongo src/mongo/s/shard_key_pattern_test.cpp ExtractQueryShardKeySingle/Nested/Hashed (the exact key: {a:{$all:[10]}} is {a:10}; {$and:[{a:10},{a:10}]}, {a:{$all:[10,10]}} and a nested {a:{b:{$eq:10}}} on a.b give none; {a:{b:10,d:40}} gives a.b); src/mongo/db/update/path_support.cpp checkEqualityConflicts (\"path 'a' is matched twice\", whatever the values)"
	srcTargetQuery         = "mongodb/mongo src/mongo/s/shard_key_pattern_query_util.cpp getShardIdsForQuery (the exact key first, else the planner's bounds on the key; no shard matched: one shard, SERVER-4914)"
	srcNull                = "mongodb/mongo src/mongo/db/query/index_bounds_builder.cpp (NOT of EXISTS: a point interval on [null, null], makeNullPointInterval; {$gte: null} and {$lte: null} are {$eq: null} by type bracketing); planner_ixselect.cpp (no NOT on a hashed index); a point lies in one chunk"
	srcUpsertDoc           = "mongodb/mongo src/mongo/db/update/update_driver.cpp populateDocumentWithQueryFields (an update by operators takes every equality, a replacement its immutable paths), path_support.cpp checkEqualityConflicts (54 NotSingleValueField, \"path 'a' is matched twice\"); write_without_shard_key_util.cpp generateUpsertDocument (the same, in a two-phase write); FerretDB 2.7 refuses it too (doctor TestAttackUpsertKeyMatchedTwiceLive)"
	srcFindAndModifyBounds = "mongodb/mongo src/mongo/s/commands/cluster_find_and_modify_cmd.cpp targetSingleShard (getShardIdsForQuery, ShardKeyNotFound unless one shard) and useTwoPhaseProtocol (no exact key: two-phase from 7.1); SERVER-44422 (backported to 7.0, 6.0, 5.0: DOCS-16308; SERVER-80224 on its 6.0 backport); SERVER-78385 (one shard without the two-phase write) closed Won't Do"
	srcTwoPhase            = "mongodb/mongo src/mongo/s/write_ops/write_without_shard_key_util.h runTwoPhaseWriteProtocol (the read phase goes to all shards, a subset for a partial shard key)"
	srcCanonical           = "mongodb/mongo src/mongo/db/matcher/expression_tree.cpp ListOfMatchExpression::getOptimizer (an AND or OR of one child is that child); update_driver.cpp populateDocumentWithQueryFields and extractShardKeyFromBasicQueryWithContext read the canonical query"
	srcNot                 = "mongodb/mongo src/mongo/db/query/index_bounds_builder.cpp translate NOT (the child's bounds, complemented); planner_ixselect.cpp (an indexed NOT on a btree index only, not of $regex, $mod, $type, $elemMatch)"
)

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
		src    string
	}{
		{ranged, bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: 3}}, OneShard, srcQuery},
		{ranged, bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "customerId", Value: 7}}, bson.D{{Key: "createdAt", Value: bson.D{{Key: "$eq", Value: 3}}}}}}}, OneShard, srcQuery},
		{ranged, bson.D{{Key: "customerId", Value: 7}}, SomeShards, srcQuery},
		{ranged, bson.D{{Key: "customerId", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}, {Key: "createdAt", Value: 3}}, SomeShards, srcQuery},
		{ranged, bson.D{{Key: "customerId", Value: bson.D{{Key: "$in", Value: bson.A{1}}}}, {Key: "createdAt", Value: 3}}, OneShard, srcQuery},
		{ranged, bson.D{{Key: "customerId", Value: bson.D{{Key: "$gt", Value: 7}}}}, SomeShards, srcQuery},
		{ranged, bson.D{{Key: "createdAt", Value: 3}}, EveryShard, srcQuery},
		{ranged, bson.D{{Key: "_id", Value: 3}}, EveryShard, srcQuery},
		{ranged, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "customerId", Value: 7}}}}}, SomeShards, srcQuery},
		{ranged, bson.D{{Key: "customerId", Value: bson.A{1, 2}}, {Key: "createdAt", Value: 3}}, EveryShard, srcQuery},
		{hashed, bson.D{{Key: "deviceId", Value: "d1"}}, OneShard, srcQuery},
		{ranged, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: bson.D{{Key: "$eq", Value: 3}}}},
			bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: 3}, {Key: "x", Value: 1}},
		}}}, OneShard, srcQuery},
		{ranged, bson.D{{Key: "customerId", Value: 7}, {Key: "$or", Value: bson.A{bson.D{{Key: "createdAt", Value: 3}}, bson.D{{Key: "createdAt", Value: 3}, {Key: "y", Value: 2}}}}}, OneShard, srcQuery},
		{ranged, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "customerId", Value: 7}, {Key: "createdAt", Value: 3}}, bson.D{{Key: "customerId", Value: 8}, {Key: "createdAt", Value: 3}}}}}, SomeShards, srcQuery},
		{ranged, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "customerId", Value: 7}}, bson.D{{Key: "name", Value: "x"}}}}}, EveryShard, srcQuery},
		{hashed, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "deviceId", Value: "d1"}, {Key: "a", Value: 1}}, bson.D{{Key: "deviceId", Value: "d1"}, {Key: "b", Value: 1}}}}}, OneShard, srcQuery},
		{hashed, bson.D{{Key: "deviceId", Value: bson.D{{Key: "$gte", Value: "d"}}}}, EveryShard, srcQuery},
		{hashed, bson.D{{Key: "deviceId", Value: bson.Regex{Pattern: "^d"}}}, EveryShard, srcQuery},
	} {
		got := tc.k.Filter(tc.filter)
		require.Equal(t, tc.want, got.Target, "%v on %v: %s (source: %s)", tc.filter, tc.k, got.Why, tc.src)
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
		src  string
	}{
		{"findAndModify by _id, 6.0", c6, bson.D{{Key: "findAndModify", Value: "orders"}, {Key: "query", Value: byID}, {Key: "update", Value: set}}, Refused, 61, srcFindAndModify},
		{"findAndModify by _id, 8.0", c8, bson.D{{Key: "findAndModify", Value: "orders"}, {Key: "query", Value: byID}, {Key: "update", Value: set}}, EveryShard, 0, srcFindAndModify},
		{"findAndModify by key", c6, bson.D{{Key: "findAndModify", Value: "orders"}, {Key: "query", Value: byKey}, {Key: "update", Value: set}}, OneShard, 0, srcFindAndModify},
		{"findAndModify by _id on hashed _id", c6, bson.D{{Key: "findAndModify", Value: "h"}, {Key: "query", Value: byID}, {Key: "remove", Value: true}}, OneShard, 0, srcFindAndModify},
		{"findAndModify on unsharded", c6, bson.D{{Key: "findAndModify", Value: "other"}, {Key: "query", Value: byID}}, OneShard, 0, srcFindAndModify},
		{"updateOne by _id, 6.0", c6, upd("orders", byID, set, false, false), EveryShard, 0, srcTargeter},
		{"updateOne by other field, 6.0", c6, upd("orders", bson.D{{Key: "name", Value: "x"}}, set, false, false), Refused, 72, srcTargeter},
		{"updateOne by other field, 8.0", c8, upd("orders", bson.D{{Key: "name", Value: "x"}}, set, false, false), EveryShard, 0, srcTargeter},
		{"updateOne by key", c6, upd("orders", byKey, set, false, false), OneShard, 0, srcTargeter},
		{"replaceOne by _id with the key in the replacement", c6, upd("orders", byID, bson.D{{Key: "customerId", Value: 7}, {Key: "n", Value: 1}}, false, false), OneShard, 0, srcTargeter},
		{"upsert by _id, 6.0", c6, upd("orders", byID, set, false, true), Refused, 61, srcTargeter},
		{"upsert by _id, 8.0", c8, upd("orders", byID, set, false, true), EveryShard, 0, srcTargeter},
		{"multi upsert by _id, 8.0", c8, upd("orders", byID, set, true, true), Refused, 61, srcTargeter},
		{"upsert by key", c6, upd("orders", byKey, set, false, true), OneShard, 0, srcTargeter},
		{"updateMany by other field", c6, upd("orders", bson.D{{Key: "name", Value: "x"}}, set, true, false), EveryShard, 0, srcTargeter},
		{"updateMany by key", c6, upd("orders", byKey, set, true, false), OneShard, 0, srcTargeter},
		{"key change without the key", c8, upd("orders", byID, bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}, false, false), Refused, 31025, srcKeyChange},
		{"key change in a multi-update", c8, upd("orders", byKey, bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}, true, false), Refused, 72, srcKeyChange},
		{"key change with the key", c6, upd("orders", byKey, bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}, false, false), OneShard, 0, srcKeyChange},
		{"pipeline key change without the key", c8, upd("orders", byID, bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "customerId", Value: 8}}}}}, false, false), Refused, 31025, srcKeyChange},
		{"deleteOne by _id, 6.0", c6, bson.D{{Key: "delete", Value: "orders"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: byID}, {Key: "limit", Value: 1}}}}}, EveryShard, 0, srcTargeter},
		{"deleteOne by other, 6.0", c6, bson.D{{Key: "delete", Value: "orders"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "limit", Value: 1}}}}}, Refused, 61, srcTargeter},
		{"deleteMany by other", c6, bson.D{{Key: "delete", Value: "orders"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "limit", Value: 0}}}}}, EveryShard, 0, srcTargeter},
		{"unique index not prefixed", c6, bson.D{{Key: "createIndexes", Value: "orders"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "name", Value: "email_1"}, {Key: "unique", Value: true}}}}}, Refused, 67, srcUnique},
		{"unique index prefixed", c6, bson.D{{Key: "createIndexes", Value: "orders"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "customerId", Value: 1}, {Key: "seq", Value: 1}}}, {Key: "name", Value: "c"}, {Key: "unique", Value: true}}}}}, OneShard, 0, srcUnique},
		{"find by key", c6, bson.D{{Key: "find", Value: "orders"}, {Key: "filter", Value: byKey}}, OneShard, 0, srcQuery},
		{"find by _id", c6, bson.D{{Key: "find", Value: "orders"}, {Key: "filter", Value: byID}}, EveryShard, 0, srcQuery},
		{"aggregate with a first $match", c6, bson.D{{Key: "aggregate", Value: "orders"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: byKey}}}}}, OneShard, 0, srcQuery},
		{"aggregate without $match", c6, bson.D{{Key: "aggregate", Value: "orders"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}}}, EveryShard, 0, srcQuery},
		{"$lookup from sharded, 5.0", c50, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "orders"}}}}}}}, Refused, 28769, srcLookup},
		{"$lookup from sharded, 6.0", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "orders"}}}}}}}, OneShard, 0, srcLookup},
		{"$out to sharded", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "orders"}}}}}, Refused, 28769, srcOut},
		{"$merge on _id into sharded", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "orders"}, {Key: "on", Value: "_id"}}}}}}}, Refused, 51190, srcMerge},
		{"$merge into sharded, on by default", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "orders"}}}}}}}, OneShard, 0, srcMerge},
		{"$merge on the key", c6, bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "orders"}, {Key: "on", Value: bson.A{"customerId", "_id"}}}}}}}}, OneShard, 0, srcMerge},
		{"insert of several with one key", c6, bson.D{{Key: "insert", Value: "orders"}, {Key: "documents", Value: bson.A{byKey, byKey}}}, OneShard, 0, srcTargeter},
		{"insert of several keys", c6, bson.D{{Key: "insert", Value: "orders"}, {Key: "documents", Value: bson.A{byKey, bson.D{{Key: "customerId", Value: 8}}}}}, SomeShards, 0, srcTargeter},
		{"insert of several on hashed _id", c6, bson.D{{Key: "insert", Value: "h"}, {Key: "documents", Value: bson.A{byID, bson.D{{Key: "_id", Value: 2}}}}}, SomeShards, 0, srcTargeter},
		{"insert with a dotted key", Cluster{Version: v(6, 0), Keys: map[string]Key{"d": key(bson.D{{Key: "m.a", Value: 1}})}}, bson.D{{Key: "insert", Value: "d"}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: 1}, {Key: "m", Value: bson.D{{Key: "a", Value: 1}}}},
			bson.D{{Key: "_id", Value: 2}, {Key: "m", Value: bson.D{{Key: "a", Value: 2}}}},
		}}}, SomeShards, 0, srcTargeter},
		{"getMore", c6, bson.D{{Key: "getMore", Value: int64(1)}, {Key: "collection", Value: "orders"}}, OneShard, 0, srcGetMore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Route(raw(t, tc.cmd))
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Target, "%s (source: %s)", got, tc.src)
			require.Equal(t, tc.code, got.Code, "%s (source: %s)", got, tc.src)
			require.NotEmpty(t, got.Why)
		})
	}
}

// TestRules: the rules of the issue that checked the package against its
// sources, on each cluster of Clusters: old is the route without the
// writes without the shard key (6.0, 7.0, and 7.1 or 8.0 at FCV 7.0),
// new the route with them (7.1 and 8.0 at their own FCV).
func TestRules(t *testing.T) {
	tenant := key(bson.D{{Key: "tenant", Value: 1}, {Key: "_id", Value: 1}})
	keys := map[string]Key{
		"users":    tenant,
		"status":   key(bson.D{{Key: "status", Value: 1}}),
		"readings": key(bson.D{{Key: "meta", Value: "hashed"}, {Key: "start", Value: 1}}),
		"items":    key(bson.D{{Key: "_id", Value: "hashed"}}),
		"overflow": key(bson.D{{Key: "parent", Value: "hashed"}, {Key: "seq", Value: 1}}),
		"dotted":   key(bson.D{{Key: "m.a", Value: 1}}),
		// a ranged first field, a hashed second one
		"tenanthashed": key(bson.D{{Key: "tenant", Value: 1}, {Key: "_id", Value: "hashed"}}),
	}
	byID := bson.D{{Key: "_id", Value: "u1"}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}
	fr := bson.D{{Key: "locale", Value: "fr"}}
	type route struct {
		t    Target
		code int32
	}
	same := func(t Target, code int32) [2]route { return [2]route{{t, code}, {t, code}} }
	for _, tc := range []struct {
		name string
		src  string
		cmd  bson.D
		want [2]route // old, new
	}{
		// HIGH 2: a replacement by _id is targeted by the key it holds.
		{"replaceOne by _id, the replacement lacking tenant", srcReplacement,
			upd("users", byID, bson.D{{Key: "_id", Value: "u1"}, {Key: "name", Value: "x"}}, false, false), same(Refused, 31025)},
		{"replaceOne by _id, the replacement holding tenant", srcReplacement,
			upd("users", byID, bson.D{{Key: "_id", Value: "u1"}, {Key: "tenant", Value: "acme"}}, false, false), same(OneShard, 0)},
		{"replaceOne by _id, no _id in the replacement, tenant in it", srcReplacement,
			upd("users", byID, bson.D{{Key: "tenant", Value: "acme"}}, false, false), same(OneShard, 0)},
		{"replaceOne by _id and tenant", srcTargeter,
			upd("users", bson.D{{Key: "_id", Value: "u1"}, {Key: "tenant", Value: bson.D{{Key: "$eq", Value: "acme"}}}}, bson.D{{Key: "_id", Value: "u1"}}, false, false), same(OneShard, 0)},
		{"replaceOne by another field, the replacement holding the key", srcReplacement,
			upd("users", bson.D{{Key: "name", Value: "x"}}, bson.D{{Key: "_id", Value: "u1"}, {Key: "tenant", Value: "acme"}}, false, false), [2]route{{OneShard, 0}, {EveryShard, 0}}},
		// HIGH 1: an upsert by _id alone; by _id and the whole key.
		{"upsert of a bucket by _id alone", srcTargeter,
			upd("readings", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "meta", Value: "s1"}}}}, false, true), [2]route{{Refused, 61}, {EveryShard, 0}}},
		{"upsert of a bucket by _id, meta and start", srcTargeter,
			upd("readings", bson.D{{Key: "_id", Value: 1}, {Key: "meta", Value: "s1"}, {Key: "start", Value: 0}}, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "n", Value: 1}}}}, false, true), same(OneShard, 0)},
		// MED 3: the FCV, not the binary, decides.
		{"findAndModify by _id", srcFCV + "; " + srcFindAndModify,
			bson.D{{Key: "findAndModify", Value: "users"}, {Key: "query", Value: byID}, {Key: "update", Value: set}}, [2]route{{Refused, 61}, {EveryShard, 0}}},
		// MED 4: subset's items by {parent, sku} under a hashed _id.
		{"deleteOne by parent and sku on hashed _id", srcTargeter,
			bson.D{{Key: "delete", Value: "items"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "parent", Value: "p"}, {Key: "sku", Value: "s"}}}, {Key: "limit", Value: 1}}}}}, [2]route{{Refused, 61}, {EveryShard, 0}}},
		{"replaceOne by parent and sku, no _id anywhere, on hashed _id", srcReplacement,
			upd("items", bson.D{{Key: "parent", Value: "p"}, {Key: "sku", Value: "s"}}, bson.D{{Key: "parent", Value: "p"}, {Key: "sku", Value: "s"}}, false, false), [2]route{{OneShard, 0}, {EveryShard, 0}}},
		// MED 5: a single write by part of the key.
		{"updateOne by parent alone on {parent: hashed, seq: 1}", srcTargeter,
			upd("overflow", bson.D{{Key: "parent", Value: "p"}}, set, false, false), [2]route{{Refused, 72}, {SomeShards, 0}}},
		{"deleteOne by parent alone on {parent: hashed, seq: 1}", srcTargeter + "; " + srcTwoPhase,
			bson.D{{Key: "delete", Value: "overflow"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "parent", Value: "p"}}}, {Key: "limit", Value: 1}}}}}, [2]route{{Refused, 61}, {SomeShards, 0}}},
		{"findAndModify by parent alone on {parent: hashed, seq: 1}", srcFindAndModifyBounds + "; " + srcTwoPhase,
			bson.D{{Key: "findAndModify", Value: "overflow"}, {Key: "query", Value: bson.D{{Key: "parent", Value: "p"}}}, {Key: "update", Value: set}}, [2]route{{Refused, 61}, {SomeShards, 0}}},
		{"an upsert by parent alone on {parent: hashed, seq: 1}", srcTargeter + "; " + srcTwoPhase,
			upd("overflow", bson.D{{Key: "parent", Value: "p"}}, set, false, true), [2]route{{Refused, 61}, {SomeShards, 0}}},
		{"updateOne by exact _id and a key prefix", srcTargeter + " (an exact _id is sent to the shards of the query)",
			upd("overflow", bson.D{{Key: "parent", Value: "p"}, {Key: "_id", Value: 1}}, set, false, false), same(SomeShards, 0)},
		// MED 7: negations bound nothing.
		{"$ne on the key", srcBounds, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$ne", Value: "paid"}}}}), same(EveryShard, 0)},
		{"$nin on the key", srcBounds, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$nin", Value: bson.A{"paid"}}}}}), same(EveryShard, 0)},
		{"$not on the key", srcBounds, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$eq", Value: "paid"}}}}}}), same(EveryShard, 0)},
		{"$exists: true on the key", srcBounds, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$exists", Value: true}}}}), same(EveryShard, 0)},
		{"an unanchored regular expression on the key", srcBounds, find("status", bson.D{{Key: "status", Value: bson.Regex{Pattern: "aid"}}}), same(EveryShard, 0)},
		{"an anchored regular expression on the key", srcBounds, find("status", bson.D{{Key: "status", Value: bson.Regex{Pattern: "^pa"}}}), same(SomeShards, 0)},
		{"a range on the key", srcQuery, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$gt", Value: "a"}}}}), same(SomeShards, 0)},
		// MED 8: collation.
		{"a string on a ranged key under a collation", srcQuery,
			append(find("status", bson.D{{Key: "status", Value: "paid"}}), bson.E{Key: "collation", Value: fr}), same(EveryShard, 0)},
		{"a number on a ranged key under a collation", srcQuery,
			append(find("status", bson.D{{Key: "status", Value: 3}}), bson.E{Key: "collation", Value: fr}), same(OneShard, 0)},
		{"a string under the simple collation", srcQuery,
			append(find("status", bson.D{{Key: "status", Value: "paid"}}), bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "simple"}}}), same(OneShard, 0)},
		{"a string on a hashed key under a collation", srcHashedCollation,
			append(find("items", bson.D{{Key: "_id", Value: "x"}}), bson.E{Key: "collation", Value: fr}), same(EveryShard, 0)},
		{"a number on a hashed key under a collation", srcHashedCollation + " (the planner bounds a number under any collator)",
			append(find("items", bson.D{{Key: "_id", Value: 7}}), bson.E{Key: "collation", Value: fr}), same(OneShard, 0)},
		{"findAndModify by a string on a hashed key under a collation", srcHashedCollation + " (bypassIsFieldHashedCheck: findAndModify alone)",
			bson.D{{Key: "findAndModify", Value: "items"}, {Key: "query", Value: bson.D{{Key: "_id", Value: "x"}}}, {Key: "remove", Value: true}, bson.E{Key: "collation", Value: fr}}, same(OneShard, 0)},
		{"updateOne by a string _id under a collation", srcTargeter + " (isExactIdQuery and the collation)",
			upd("users", byID, set, false, false, bson.E{Key: "collation", Value: fr}), [2]route{{Refused, 72}, {EveryShard, 0}}},
		{"updateOne by a numeric _id under a collation", srcTargeter + " (isExactIdQuery and the collation)",
			upd("users", bson.D{{Key: "_id", Value: 7}}, set, false, false, bson.E{Key: "collation", Value: fr}), [2]route{{EveryShard, 0}, {EveryShard, 0}}},
		// LOW.
		{"a unique index starting with _id", srcUnique,
			bson.D{{Key: "createIndexes", Value: "status"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}}, {Key: "name", Value: "i"}, {Key: "unique", Value: true}}}}}, same(OneShard, 0)},
		{"an insert with an array at a key field", srcTargeter + " (targetInsert: Shard key cannot contain array values)",
			bson.D{{Key: "insert", Value: "status"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "status", Value: bson.A{"a"}}}}}}, same(Refused, 61)},
		{"an insert with an array above a dotted key field", srcTargeter + " (targetInsert: array descendants)",
			bson.D{{Key: "insert", Value: "dotted"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "m", Value: bson.A{bson.D{{Key: "a", Value: 1}}}}}}}}, same(Refused, 61)},
		{"an equality on the parent of a dotted key field", srcExtract,
			find("dotted", bson.D{{Key: "m", Value: bson.D{{Key: "a", Value: 1}}}}), same(OneShard, 0)},
		// The exact key against the bounds (issue 33, LOW).
		{"$all of one value", srcExtract, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$all", Value: bson.A{"paid"}}}}}), same(OneShard, 0)},
		{"an upsert by $all of one value", srcExtract,
			upd("status", bson.D{{Key: "status", Value: bson.D{{Key: "$all", Value: bson.A{"paid"}}}}}, set, false, true), same(OneShard, 0)},
		{"the key twice by $and", srcExtract + "; " + srcTargetQuery,
			find("status", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}}), same(OneShard, 0)},
		{"the key twice by $and, two values", srcExtract + "; " + srcTargetQuery,
			find("status", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "due"}}}}}), same(OneShard, 0)},
		{"an upsert with the key twice by $and, two values", srcExtract + "; " + srcTargeter,
			upd("status", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "due"}}}}}, set, false, true), [2]route{{Refused, 61}, {Refused, 54}}},
		{"an upsert by $all of two values", srcExtract + "; " + srcTargeter + "; " + srcUpsertDoc,
			upd("status", bson.D{{Key: "status", Value: bson.D{{Key: "$all", Value: bson.A{"paid", "paid"}}}}}, set, false, true), [2]route{{Refused, 61}, {Refused, 54}}},
		{"an upsert by the full key matching another path twice", srcUpsertDoc,
			upd("status", bson.D{{Key: "status", Value: "paid"}, {Key: "$and", Value: bson.A{bson.D{{Key: "n", Value: 1}}, bson.D{{Key: "n", Value: 1}}}}}, set, false, true), same(Refused, 54)},
		{"a replacement upsert by the full key matching another path twice", srcUpsertDoc + " (a replacement takes only _id and the key's fields from the filter)",
			upd("status", bson.D{{Key: "status", Value: "paid"}, {Key: "n", Value: bson.D{{Key: "$all", Value: bson.A{1, 2}}}}}, bson.D{{Key: "status", Value: "paid"}}, false, true), same(OneShard, 0)},
		{"a findAndModify upsert with the key twice by $and", srcUpsertDoc + "; " + srcFindAndModifyBounds,
			bson.D{{Key: "findAndModify", Value: "status"}, {Key: "query", Value: bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}}}, {Key: "update", Value: set}, {Key: "upsert", Value: true}}, same(Refused, 54)},
		{"updateOne with the key twice by $and", srcTargeter + " (targetUpdate: one shard by the query, before any other rule)",
			upd("status", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}}, set, false, false), same(OneShard, 0)},
		{"deleteOne with the key twice by $and", srcTargeter + " (targetDelete: one shard by the query, before any other rule)",
			bson.D{{Key: "delete", Value: "status"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}}}, {Key: "limit", Value: 1}}}}}, same(OneShard, 0)},
		{"updateOne by an $or of one key", srcTargeter + " (targetUpdate: one shard by the query)",
			upd("status", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "status", Value: "paid"}, {Key: "n", Value: 1}}, bson.D{{Key: "status", Value: "paid"}, {Key: "n", Value: 2}}}}}, set, false, false), same(OneShard, 0)},
		{"findAndModify with the key twice by $and", srcExtract + "; " + srcFindAndModifyBounds + "; " + srcTwoPhase + " (from 7.1, no exact key: a two-phase write, its read phase on the one shard)",
			bson.D{{Key: "findAndModify", Value: "status"}, {Key: "query", Value: bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}}}, {Key: "remove", Value: true}}, same(OneShard, 0)},
		{"findAndModify by an $or of one branch", srcCanonical + "; " + srcFindAndModifyBounds,
			bson.D{{Key: "findAndModify", Value: "status"}, {Key: "query", Value: bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}}}}}, {Key: "remove", Value: true}}, same(OneShard, 0)},
		{"a nested $eq under the parent of a dotted key field", srcExtract + " (Nested $eq is actually a document element)",
			find("dotted", bson.D{{Key: "m", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$eq", Value: 1}}}}}}), same(EveryShard, 0)},
		{"an upsert by a nested $eq", srcExtract + "; " + srcTargeter,
			upd("dotted", bson.D{{Key: "m", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$eq", Value: 1}}}}}}, set, false, true), [2]route{{Refused, 61}, {EveryShard, 0}}},
		{"an upsert by the parent of a dotted key field", srcExtract,
			upd("dotted", bson.D{{Key: "m", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}}}, set, false, true), same(OneShard, 0)},
		{"$eq of a parent document", srcExtract + " ($eq is an equality on m, reaching m.a)",
			find("dotted", bson.D{{Key: "m", Value: bson.D{{Key: "$eq", Value: bson.D{{Key: "a", Value: 1}}}}}}), same(OneShard, 0)},
		{"the parent of a dotted key field twice", srcExtract + " (no exact key); " + srcTargetQuery + " (no bounds on m.a from m)",
			find("dotted", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "m", Value: bson.D{{Key: "a", Value: 1}}}}, bson.D{{Key: "m", Value: bson.D{{Key: "a", Value: 1}}}}}}}), same(EveryShard, 0)},
		{"$not of a range on a ranged key", srcNot, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: "p"}}}}}}), same(SomeShards, 0)},
		{"$not of $exists: true on a ranged key", srcNull, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$exists", Value: true}}}}}}), same(OneShard, 0)},
		{"$exists: false on a ranged key", srcNull, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$exists", Value: false}}}}), same(OneShard, 0)},
		{"$gte: null on a ranged key", srcNull, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$gte", Value: nil}}}}), same(OneShard, 0)},
		{"$lte: null after an equality on a compound key", srcNull, find("users", bson.D{{Key: "tenant", Value: "a"}, {Key: "_id", Value: bson.D{{Key: "$lte", Value: nil}}}}), same(OneShard, 0)},
		{"$exists: false on a hashed key", srcNull + " (a NOT on a hashed index: no bounds)", find("items", bson.D{{Key: "_id", Value: bson.D{{Key: "$exists", Value: false}}}}), same(EveryShard, 0)},
		{"an upsert by $exists: false", srcNull + "; " + srcExtract + " (no exact key: no equality)",
			upd("status", bson.D{{Key: "status", Value: bson.D{{Key: "$exists", Value: false}}}}, set, false, true), [2]route{{Refused, 61}, {OneShard, 0}}},
		{"a replacement by $exists: false lacking the key field", srcNull + "; " + srcTargeter + " (one shard by the query; the document keeps its missing key)",
			upd("status", bson.D{{Key: "status", Value: bson.D{{Key: "$exists", Value: false}}}}, bson.D{{Key: "n", Value: 1}}, false, false), same(OneShard, 0)},
		{"an upsert by null and $exists: false", srcNull + "; " + srcExtract + " (the exact key is read from the equalities alone)",
			upd("status", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: nil}}, bson.D{{Key: "status", Value: bson.D{{Key: "$exists", Value: false}}}}}}}, set, false, true), same(OneShard, 0)},
		{"an upsert by $exists: false and null", srcNull + "; " + srcExtract + " (the exact key is read from the equalities alone)",
			upd("status", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: bson.D{{Key: "$exists", Value: false}}}}, bson.D{{Key: "status", Value: nil}}}}}, set, false, true), same(OneShard, 0)},
		{"an upsert by an $or of one branch", srcCanonical,
			upd("status", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}}}}, set, false, true), same(OneShard, 0)},
		{"find by an $or of one branch with a prefix", srcCanonical,
			find("users", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "tenant", Value: "a"}}}}}), same(SomeShards, 0)},
		{"$not of a range on a hashed key", srcNot, find("items", bson.D{{Key: "_id", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: 5}}}}}}), same(EveryShard, 0)},
		{"$not of a range on a key with a hashed field", srcNot + " (the key's index is a hashed one)",
			find("tenanthashed", bson.D{{Key: "tenant", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: "a"}}}}}}), same(EveryShard, 0)},
		{"$not of a regular expression", srcNot, find("status", bson.D{{Key: "status", Value: bson.D{{Key: "$not", Value: bson.Regex{Pattern: "^p"}}}}}), same(EveryShard, 0)},
		{"a key change without the full key", srcKeyChange,
			upd("users", byID, bson.D{{Key: "$set", Value: bson.D{{Key: "tenant", Value: "b"}}}}, false, false), same(Refused, 31025)},
	} {
		for _, c := range Clusters(keys) {
			t.Run(tc.name+"/"+fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor)+fcvName(c), func(t *testing.T) {
				got, err := c.Route(raw(t, tc.cmd))
				require.NoError(t, err)
				want := tc.want[0]
				if c.WritesWithoutShardKey() {
					want = tc.want[1]
				}
				require.Equal(t, want.t, got.Target, "%s on %s (source: %s)", got, c, tc.src)
				require.Equal(t, want.code, got.Code, "%s on %s (source: %s)", got, c, tc.src)
				require.NotEmpty(t, got.Why)
			})
		}
	}
}

func fcvName(c Cluster) string {
	if c.FCV == (patterns.Version{}) {
		return ""
	}
	return fmt.Sprintf(" FCV %d.%d", c.FCV.Major, c.FCV.Minor)
}

func find(coll string, filter bson.D) bson.D {
	return bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter}}
}

func upd(coll string, q bson.D, u any, multi, upsert bool, extra ...bson.E) bson.D {
	return bson.D{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{append(bson.D{
		{Key: "q", Value: q}, {Key: "u", Value: u}, {Key: "multi", Value: multi}, {Key: "upsert", Value: upsert},
	}, extra...)}}}
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

// TestKeepValues: the key fields a replacement lacks take their stored
// values; those it holds, or neither holds, are left as they are.
func TestKeepValues(t *testing.T) {
	stored := raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "tenant", Value: "acme"}, {Key: "geo", Value: bson.D{{Key: "region", Value: "eu"}}}, {Key: "n", Value: 1}})
	fields := []string{"tenant", "geo.region", "missing"}
	doc := raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 2}})
	got, err := KeepValues(doc, stored, fields)
	require.NoError(t, err)
	require.Equal(t, raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 2}, {Key: "tenant", Value: "acme"}, {Key: "geo", Value: bson.D{{Key: "region", Value: "eu"}}}}).String(), got.String())
	k := key(bson.D{{Key: "tenant", Value: 1}, {Key: "_id", Value: 1}})
	r := Cluster{Version: patterns.Version{Major: 6}, Keys: map[string]Key{"u": k}}
	route, err := r.Route(raw(t, upd("u", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 2}, {Key: "tenant", Value: "acme"}}, false, false)))
	require.NoError(t, err)
	require.Equal(t, OneShard, route.Target, "the kept key targets the replacement")

	holds := raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "tenant", Value: "other"}, {Key: "geo", Value: bson.D{{Key: "city", Value: "x"}}}})
	got, err = KeepValues(holds, stored, fields)
	require.NoError(t, err)
	require.Equal(t, raw(t, bson.D{{Key: "_id", Value: 1}, {Key: "tenant", Value: "other"}, {Key: "geo", Value: bson.D{{Key: "city", Value: "x"}, {Key: "region", Value: "eu"}}}}).String(), got.String())

	same, err := KeepValues(stored, stored, fields)
	require.NoError(t, err)
	require.Equal(t, stored, same, "nothing lacking: the replacement as is")

	_, err = KeepValues(raw(t, bson.D{{Key: "geo", Value: 3}}), stored, fields)
	require.ErrorIs(t, err, patterns.ErrInvalid)
}
