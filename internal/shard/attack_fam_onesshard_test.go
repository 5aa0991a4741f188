package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestAttackFindAndModifyOneShardByBounds: shard.go promises "findAndModify,
// up to 7.0, needs the exact shard key: an _id alone is not enough (61
// ShardKeyNotFound). From 7.1 on, mongos accepts any filter and routes it
// with a two-phase write (every shard)", while "A single update ... or
// delete ... goes to one shard when its filter reaches one"; TestRules
// routes "findAndModify with the key twice by $and" refused (61), then to
// every shard.
//
// mongos targets findAndModify by the query's shards as it does a single
// delete (SERVER-44422, fixed and backported to 7.0, 6.0 and 5.0: "changing
// findAndModify and delete to target using ChunkManager::getShardIdsForQuery()
// ... and throwing if more than one shard is targeted"; DOCS-16308 "You can
// now perform a findAndModify and deleteOne with a partial shard key in
// the query as long as only one shard is targeted"), and from 7.1 without
// the two-phase protocol when one shard is targeted (SERVER-78385). The
// server's own test, mongodb/mongo jstests/sharding (findAndModify "not an
// exact match on shard key and target only a single shard work without
// having to use the two phase protocol", run with
// featureFlagUpdateOneWithoutShardKey: false): {findAndModify, query: {a:
// 1}} under {a: 1, b: 1} with a's chunk on one shard succeeds on that
// shard; only a query reaching several shards fails with ShardKeyNotFound.
//
// A filter that matches the key twice is bounded to one point: one shard,
// whatever the chunks (the package routes the same find, updateOne and
// deleteOne there). A single-branch $or is the branch itself once
// canonicalized (ListOfMatchExpression's optimizer replaces an $or of one
// child by the child), from which extractShardKeyFromQuery takes the exact
// key: one shard, as the package routes the same updateOne.
//
// (Checked when fixed: SERVER-78385 was closed Won't Do; from 7.1
// cluster_find_and_modify_cmd.cpp sends a filter without the exact key,
// such as the key twice, through the two-phase write, whose read phase
// reaches the filter's one shard, so the route is one shard still.)
func TestAttackFindAndModifyOneShardByBounds(t *testing.T) {
	keys := map[string]Key{"status": key(bson.D{{Key: "status", Value: 1}})}
	for _, tc := range []struct {
		name string
		q    bson.D
	}{
		{"the key twice by $and", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}}},
		{"an $or of one branch holding the key", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}}}}},
	} {
		for _, c := range Clusters(keys) {
			t.Run(tc.name+"/"+fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor)+fcvName(c), func(t *testing.T) {
				del, err := c.Route(raw(t, bson.D{{Key: "delete", Value: "status"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: tc.q}, {Key: "limit", Value: 1}}}}}))
				require.NoError(t, err)
				require.Equal(t, OneShard, del.Target, "deleteOne, for reference: %s", del)
				got, err := c.Route(raw(t, bson.D{{Key: "findAndModify", Value: "status"}, {Key: "query", Value: tc.q}, {Key: "remove", Value: true}}))
				require.NoError(t, err)
				require.Equal(t, OneShard, got.Target, "findAndModify %v on %s: %s (SERVER-44422: targeted by getShardIdsForQuery like deleteOne)", tc.q, c, got)
			})
		}
	}
}

// TestAttackUpsertByOrOfOneBranch: shard.go promises "An upsert needs the
// exact shard key (61 ...) ... what mongos extracts from the filter's
// equalities". mongos extracts it from the canonical query
// (extractShardKeyFromBasicQueryWithContext canonicalizes the filter
// first), in which an $or of one branch is that branch (the match
// expression optimizer replaces an $or or $and of one child by the
// child): {$or: [{status: "paid"}]} holds the exact key {status: "paid"},
// so the upsert goes to its shard on every version, as the package routes
// the same filter's updateOne. The package refuses it before 7.1.
func TestAttackUpsertByOrOfOneBranch(t *testing.T) {
	keys := map[string]Key{"status": key(bson.D{{Key: "status", Value: 1}})}
	q := bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}}}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}
	for _, c := range Clusters(keys) {
		t.Run(fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor)+fcvName(c), func(t *testing.T) {
			got, err := c.Route(raw(t, upd("status", q, set, false, true)))
			require.NoError(t, err)
			require.Equal(t, OneShard, got.Target, "upsert by %v on %s: %s (the canonical query holds the exact key)", q, c, got)
		})
	}
}
