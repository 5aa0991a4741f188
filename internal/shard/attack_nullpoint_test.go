package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestAttackNullPointBounds: shard.go promises "A filter reaches one shard
// when it matches every field of the shard key by one equality ...; some
// shards when it matches ... a ranged (not hashed) first field by a range
// (or ... by the negation of a range)", and TestRules' own row "$not of
// $exists: true on a ranged key" cites "(NOT of EXISTS: the null point)"
// yet expects some shards.
//
// mongos routes a filter without an exact key by the planner's bounds on
// the key (shard_key_pattern_query_util.cpp getShardIdsForQuery), and the
// planner bounds these conditions by the one point null, exactly as {k:
// null} (mongodb/mongo src/mongo/db/query/index_bounds_builder.cpp):
//   - NOT of EXISTS ({$exists: false}, {$not: {$exists: true}}): "If we
//     have a NOT -> EXISTS, we must handle separately ... {$exists:false}
//     is a point-interval on [null,null]" (makeNullPointInterval);
//   - $gte: null: "Because of type-bracketing, {$gte: null} and {$lte:
//     null} are equivalent to {$eq: null}" (isEqualityOrInNull); its
//     bounds start at null and end before the first number, where no key
//     value lies: the chunk of null.
//
// On a ranged key (planner_ixselect.cpp allows the NOT on a btree index),
// the point lies in one chunk: one shard, as for {status: null}, which the
// package routes to one shard. On a compound key the null point on the
// last field after an equality on the first is one shard too.
func TestAttackNullPointBounds(t *testing.T) {
	status := key(bson.D{{Key: "status", Value: 1}})
	tenant := key(bson.D{{Key: "tenant", Value: 1}, {Key: "_id", Value: 1}})
	op := func(name string, v any) bson.D { return bson.D{{Key: name, Value: v}} }
	for _, tc := range []struct {
		name   string
		k      Key
		filter bson.D
	}{
		{"{status: null} (the package's own one-shard case, for reference)", status, bson.D{{Key: "status", Value: nil}}},
		{"$exists: false", status, bson.D{{Key: "status", Value: op("$exists", false)}}},
		{"$not: {$exists: true}", status, bson.D{{Key: "status", Value: op("$not", op("$exists", true))}}},
		{"$gte: null", status, bson.D{{Key: "status", Value: op("$gte", nil)}}},
		{"tenant equality, _id $exists: false", tenant, bson.D{{Key: "tenant", Value: "acme"}, {Key: "_id", Value: op("$exists", false)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.k.Filter(tc.filter)
			require.Equal(t, OneShard, got.Target, "%s under %s: %s (index_bounds_builder.cpp: the null point, one chunk)", fmt.Sprint(tc.filter), tc.k, got)
		})
	}
}

// TestAttackTwoPhaseReadsTheQueryShards: shard.go promises "From 7.1 on
// any filter is accepted (two-phase write, every shard)" for a single
// update or delete, and for findAndModify "From 7.1 on, mongos accepts any
// filter and routes it with a two-phase write (every shard)".
//
// The two-phase protocol's read phase goes where the query goes, not to
// every shard: mongodb/mongo src/mongo/s/write_ops/write_without_shard_key_util.h
// runTwoPhaseWriteProtocol: "1. Read Phase: Using the query from the
// original write request, we broadcast the query to all of the shards (a
// subset of shards if we have a partial shard key)"; the read phase's
// _clusterQueryWithoutShardKey targets with
// scatterGatherVersionedTargetByRoutingTable, "Target all shards that own
// chunks that match the query" (getShardIdsForQuery). With an equality on
// the first (hashed) field of {parent: "hashed", seq: 1} the query reaches
// the shards owning that hash's chunks: some shards, as the package routes
// the same filter in a find.
func TestAttackTwoPhaseReadsTheQueryShards(t *testing.T) {
	keys := map[string]Key{"overflow": key(bson.D{{Key: "parent", Value: "hashed"}, {Key: "seq", Value: 1}})}
	byParent := bson.D{{Key: "parent", Value: "p"}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}
	for _, tc := range []struct {
		name string
		cmd  bson.D
	}{
		{"find (for reference)", find("overflow", byParent)},
		{"updateOne", upd("overflow", byParent, set, false, false)},
		{"deleteOne", bson.D{{Key: "delete", Value: "overflow"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: byParent}, {Key: "limit", Value: 1}}}}}},
		{"findAndModify", bson.D{{Key: "findAndModify", Value: "overflow"}, {Key: "query", Value: byParent}, {Key: "update", Value: set}}},
	} {
		for _, c := range Clusters(keys) {
			if !c.WritesWithoutShardKey() {
				continue
			}
			t.Run(tc.name+"/"+fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor), func(t *testing.T) {
				got, err := c.Route(raw(t, tc.cmd))
				require.NoError(t, err)
				require.Equal(t, SomeShards, got.Target, "%s on %s (write_without_shard_key_util.h: the read phase goes to a subset of shards with a partial shard key)", got, c)
			})
		}
	}
}
