package doctor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
)

// TestShardingArrayTargetRemedy (issue 33 regression): extref's index on
// an array target did not carry patterns.Index.EveryShard, so the doctor
// told to shard on an array path. doctor/sharding.go,
// RuleShardKeyDeclaredQueries: "an index whose patterns.Index.EveryShard
// says its queries read the whole collection by design is not reported";
// issue 33 (item 6): the doctor must not warn on the packages' own indexes
// under the keys their docs give, nor tell to shard on a key the docs
// warn against. extref/doc.go: "for a copy inside an array (which cannot
// be a shard key), Sync's updateMany goes to every shard" (by design,
// under any target key), and docs/sharding.md lists "Sync into arrays" as
// every shard.
//
// Reference: a shard key field cannot hold an array (mongodb/mongo
// collection_routing_info_targeter.cpp targetInsert: "Shard key cannot
// contain array values or array descendants", 61; the manual, Shard Keys:
// "The shard key ... cannot be a multikey index"), so the remedy "consider
// a key that starts with items.product.id" for extref's index on an array
// target is impossible to follow, and the finding is raised for a query
// the package sends to every shard by design.
func TestShardingArrayTargetRemedy(t *testing.T) {
	db := mongotest.Client().Database("shop")
	type productRef struct {
		ID   int    `bson:"id"`
		Name string `bson:"name"`
	}
	r, err := extref.New[productRef](db, extref.Config{Source: "products", Targets: []extref.Target{{Collection: "carts", Path: "items[].product"}}})
	require.NoError(t, err)
	keys := map[string]shard.Key{"carts": shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}})}
	for _, c := range shard.Clusters(keys) {
		fs, err := shardingFindings(c, "shop", r.Indexes())
		require.NoError(t, err)
		for _, f := range fs {
			t.Errorf("%s: %s: %s; remedy: %s", c, f.Rule, f.Message, f.Remedy)
		}
	}
}
