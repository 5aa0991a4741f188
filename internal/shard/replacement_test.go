package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestReplacementWithoutID (issue 33 regression): TestRules' row
// "replaceOne by parent and sku, no _id anywhere, on hashed _id" and the
// replacement rule of shard.go said mongos refuses such a replacement (31025) before the writes
// without the shard key; subset/doc.go: "Update's replacement is targeted
// at the chunk of a null _id, where it matches nothing
// ([patterns.ErrNotFound] for an item that exists) or is refused (31025)".
//
// Reference (mongodb/mongo): collection_routing_info_targeter.cpp
// getUpdateExprForTargeting (emplaceMissingShardKeyValuesForDocument
// skips _id: "Illegal to emplace a null _id"; an _id missing from the
// replacement is taken from an exact _id of the query, and stays missing
// without one), then targetUpdate targets the replacement by
// extractShardKeyFromDoc, which hashes a missing field as null
// (shard_key_pattern_test.cpp ExtractDocShardKeyHashed: {a: {c: v}} ->
// {a.b: nullHashValue}): one shard, the owner of hash(null). There the
// shard runs the replacement; a replacement without _id keeps the
// document's _id (the update keeps _id), so the shard key does not
// change and no 31025 is raised: it replaces the item if that shard holds
// it, and matches nothing otherwise. Not refused.
func TestReplacementWithoutID(t *testing.T) {
	keys := map[string]Key{"items": key(bson.D{{Key: "_id", Value: "hashed"}})}
	cmd := upd("items", bson.D{{Key: "parent", Value: "p"}, {Key: "sku", Value: "s"}}, bson.D{{Key: "parent", Value: "p"}, {Key: "sku", Value: "s"}, {Key: "n", Value: 2}}, false, false)
	for _, c := range Clusters(keys) {
		if c.WritesWithoutShardKey() {
			continue // a two-phase write: every shard, as the package says
		}
		t.Run(fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor)+fcvName(c), func(t *testing.T) {
			got, err := c.Route(raw(t, cmd))
			require.NoError(t, err)
			require.Equal(t, OneShard, got.Target, "%s on %s: mongos targets the chunk of hash(null) and the shard keeps the _id: no 31025", got, c)
		})
	}
}
