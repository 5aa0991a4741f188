package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCollationOnHashedKey (issue 33 regression): the package said
// (FilterCollated) that a collation other than the simple one makes an
// equality on a string useless for targeting only "on a ranged (not
// hashed) key field", and routed {_id: "x"} with {locale: "fr"} on
// {_id: "hashed"} to one shard.
//
// The server says otherwise (mongodb/mongo):
//   - src/mongo/s/chunk_manager.cpp, ChunkManager::findIntersectingChunk:
//     under a non-simple collation it throws ShardKeyNotFound for any
//     field that is the hashed field of the pattern ("We must assume that
//     if the field is specified as "hashed" in the shard key pattern, then
//     the hash value could have come from a collatable type"), unless
//     bypassIsFieldHashedCheck, which only findAndModify passes
//     (cluster_find_and_modify_cmd.cpp: "we always assume that a
//     findAndModify request using _id is targetable to a single shard").
//   - shard_key_pattern_query_util.cpp getShardIdsForCanonicalQuery then
//     falls back to the bounds of the shard-key "index" built with a null
//     collator: the planner gives no bounds for a string comparison under
//     another collator (planner_ixselect boundsGeneratingNodeContainsComparisonToType),
//     so the bounds are [MinKey, MaxKey]: every shard.
//   - collection_routing_info_targeter.cpp targetUpdate / targetDelete:
//     a single write that reaches several shards must be an exact _id,
//     and isExactIdQuery is false for a collatable _id under a collation
//     that is not the collection's: 72 (update) / 61 (delete) before the
//     writes without the shard key, a two-phase write (every shard) after.
//
// So under the recommended {_id: "hashed"} (versioning, extref's source,
// subset's and outlier's parents), a string _id with a collation is not
// one shard, and a single update or delete of it is refused on 6.0/7.0.
func TestCollationOnHashedKey(t *testing.T) {
	keys := map[string]Key{"items": key(bson.D{{Key: "_id", Value: "hashed"}})}
	fr := bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}
	type route struct {
		t    Target
		code int32
	}
	for _, tc := range []struct {
		name string
		cmd  bson.D
		want [2]route // old, new
	}{
		{"find by a string _id under a collation", append(find("items", bson.D{{Key: "_id", Value: "x"}}), fr),
			[2]route{{EveryShard, 0}, {EveryShard, 0}}},
		{"updateOne by a string _id under a collation", upd("items", bson.D{{Key: "_id", Value: "x"}}, set, false, false, fr),
			[2]route{{Refused, 72}, {EveryShard, 0}}},
		{"deleteOne by a string _id under a collation", bson.D{{Key: "delete", Value: "items"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "x"}}}, {Key: "limit", Value: 1}, fr}}}},
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
