package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestAttackShardKeyExtraction: the package documentation (shard.go) once
// promised the rules of mongos for "an equality on a document is also one
// on each of its fields, by their dotted paths", "$all ... on their
// values" as a range, and an upsert needing "equality on every shard-key
// field". mongos decides equality by ShardKeyPattern::extractShardKeyFromQuery,
// whose own tests (mongodb/mongo src/mongo/s/shard_key_pattern_test.cpp,
// ExtractQueryShardKeySingle / ExtractQueryShardKeyNested /
// ExtractQueryShardKeyHashed) say:
//   - {a: {$all: [10]}} extracts {a: 10}: an equality, one shard;
//   - {$and: [{a: 10}, {a: 10}]} extracts nothing (two equalities on one
//     path), so an upsert with it has no exact shard key: "Failed to target
//     upsert by query :: could not extract exact shard key" (61) before the
//     writes without the shard key (collection_routing_info_targeter.cpp
//     targetUpdate, targetByShardKey);
//   - {a: {b: {$eq: 10}}} on key a.b extracts nothing ("Nested $eq is
//     actually a document element"): it is an equality on the document a,
//     no bound on a.b, so every shard for a query, and refused (61) as an
//     upsert.
//
// Where no exact key is extracted, a query still goes where the planner's
// bounds on the key go (shard_key_pattern_query_util.cpp
// getShardIdsForQuery): the key twice is a point, one shard; and from 7.1
// an upsert that reaches one shard by its query goes there
// (collection_routing_info_targeter.cpp targetUpdate).
func TestAttackShardKeyExtraction(t *testing.T) {
	keys := map[string]Key{
		"s": key(bson.D{{Key: "a", Value: 1}}),
		"d": key(bson.D{{Key: "a.b", Value: 1}}),
	}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}
	type route struct {
		t    Target
		code int32
	}
	same := func(t Target, code int32) [2]route { return [2]route{{t, code}, {t, code}} }
	for _, tc := range []struct {
		name string
		cmd  bson.D
		want [2]route // old, new
	}{
		{"$all of one value is an equality", find("s", bson.D{{Key: "a", Value: bson.D{{Key: "$all", Value: bson.A{10}}}}}), same(OneShard, 0)},
		// From 7.1 it reaches one shard, which cannot build the document
		// to insert from it (54; TestAttackUpsertKeyMatchedTwice).
		{"an upsert with the key twice by $and", upd("s", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "a", Value: 10}}, bson.D{{Key: "a", Value: 10}}}}}, set, false, true),
			[2]route{{Refused, 61}, {Refused, 54}}},
		{"a nested $eq is a document, not an equality on a.b", find("d", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.D{{Key: "$eq", Value: 10}}}}}}), same(EveryShard, 0)},
		{"an upsert by a nested $eq", upd("d", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.D{{Key: "$eq", Value: 10}}}}}}, set, false, true),
			[2]route{{Refused, 61}, {EveryShard, 0}}},
	} {
		for _, c := range Clusters(keys) {
			t.Run(tc.name+"/"+fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor)+fcvName(c), func(t *testing.T) {
				got, err := c.Route(raw(t, tc.cmd))
				require.NoError(t, err)
				want := tc.want[0]
				if c.WritesWithoutShardKey() {
					want = tc.want[1]
				}
				require.Equal(t, want.t, got.Target, "%s on %s", got, c)
				require.Equal(t, want.code, got.Code, "%s on %s", got, c)
			})
		}
	}
}

// TestAttackNotOfARange: shard.go, bounds, once said: "$ne, $nin, $not, $exists:
// true and an unanchored expression cover the whole range". For $not of
// a range on a ranged (not hashed) key field the server's bounds are the
// complement of the child's (mongodb/mongo
// src/mongo/db/query/index_bounds_builder.cpp translate, NOT:
// "_translatePredicate(child, ...); oilOut->complement()"): {a: {$not:
// {$gt: 5}}} is [MinKey, 5] plus the types after numbers, which leaves out
// the chunks inside (5, +inf]: the shards owning the chunks of that range,
// not every shard (getShardIdsForCanonicalQuery routes by those bounds).
func TestAttackNotOfARange(t *testing.T) {
	k := key(bson.D{{Key: "a", Value: 1}})
	got := k.Filter(bson.D{{Key: "a", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: 5}}}}}})
	require.Equal(t, SomeShards, got.Target, "%s", got)
}
