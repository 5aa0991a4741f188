package doctor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// configCollection is a document of config.collections as a mongos 7.0
// answers it.
func configCollection(t *testing.T, ns string, key bson.D, dropped bool) bson.Raw {
	t.Helper()
	d := bson.D{
		{Key: "_id", Value: ns},
		{Key: "lastmodEpoch", Value: bson.NewObjectID()},
		{Key: "lastmod", Value: bson.NewDateTimeFromTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))},
		{Key: "timestamp", Value: bson.Timestamp{T: 1764460800, I: 12}},
		{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
		{Key: "key", Value: key},
		{Key: "unique", Value: false},
		{Key: "noBalance", Value: false},
	}
	if dropped {
		d = append(d, bson.E{Key: "dropped", Value: true})
	}
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

func TestShardingFindingsFromConfigCollections(t *testing.T) {
	docs := []bson.Raw{
		configCollection(t, "config.system.sessions", bson.D{{Key: "_id", Value: 1}}, false),
		configCollection(t, "shop.posts_overflow", bson.D{{Key: "_id", Value: "hashed"}}, false),
		configCollection(t, "shop.reviews", bson.D{{Key: "productId", Value: "hashed"}, {Key: "_id", Value: 1}}, false),
		configCollection(t, "shop.readings", bson.D{{Key: "start", Value: 1}}, false),
		configCollection(t, "shop.old", bson.D{{Key: "x", Value: 1}}, true),
		configCollection(t, "shopping.carts", bson.D{{Key: "_id", Value: "hashed"}}, false),
	}
	keys, err := shardKeysOf("shop", docs)
	require.NoError(t, err)
	require.Equal(t, map[string]shard.Key{
		"posts_overflow": {{Path: "_id", Hashed: true}},
		"reviews":        {{Path: "productId", Hashed: true}, {Path: "_id"}},
		"readings":       {{Path: "start"}},
	}, keys, "other databases and dropped collections are left out")

	db := mongotest.Client().Database("shop")
	declared := []patterns.Index{
		{Collection: db.Collection("posts_overflow"), Model: mongo.IndexModel{
			Keys: bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: 1}}, Options: options.Index().SetUnique(true)}},
		{Collection: db.Collection("reviews"), Model: mongo.IndexModel{
			Keys: bson.D{{Key: "productId", Value: 1}, {Key: "at", Value: -1}, {Key: "_id", Value: -1}}}},
		{Collection: db.Collection("readings"), Model: mongo.IndexModel{
			Keys: bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: 1}}}},
		{Collection: db.Collection("readings"), Model: mongo.IndexModel{Keys: bson.D{{Key: "start", Value: 1}}}},
		{Collection: db.Collection("unsharded"), Model: mongo.IndexModel{
			Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}},
		{Collection: mongotest.Client().Database("shopping").Collection("readings"), Model: mongo.IndexModel{Keys: bson.D{{Key: "meta", Value: 1}}}},
	}
	fs, err := shardingFindings(shard.Cluster{Version: patterns.Version{Major: 7}, Keys: keys}, "shop", declared)
	require.NoError(t, err)
	require.Len(t, fs, 2, "%v", fs)

	require.Equal(t, RuleShardKeyUniqueIndex, fs[0].Rule)
	require.Equal(t, Critical, fs[0].Severity)
	require.Equal(t, "posts_overflow", fs[0].Collection)
	require.Equal(t, "parent_1_seq_1", fs[0].Index)
	code, _ := fs[0].Evidence.Get("code")
	require.Equal(t, 67, code)

	require.Equal(t, RuleShardKeyDeclaredQueries, fs[1].Rule)
	require.Equal(t, Warning, fs[1].Severity)
	require.Equal(t, "readings", fs[1].Collection)
	require.Equal(t, "meta", fs[1].Field)
	key, _ := fs[1].Evidence.Get("shardKey")
	require.Equal(t, `{"start": 1}`, key)
}

func TestShardingRuleIsSilentOffAMongos(t *testing.T) {
	c := &checker{s: settings{Options: Options{Indexes: []patterns.Index{{}}}}}
	require.NoError(t, c.sharding(t.Context(), &patterns.Server{Topology: patterns.Standalone}))
	require.Empty(t, c.rep.Findings)
}

// TestShardingLeavesOutUnsplittableCollections: MongoDB 8.0 lists
// unsharded collections it tracks (moved with moveCollection, or
// unsharded with unshardCollection) in config.collections as
// {key: {_id: 1}, unsplittable: true}. Such a collection lives on one
// shard: no query of it goes to every shard and any unique index can be
// built, so it is no sharded collection for the rules. Before, a unique
// index on email was reported Critical (code 67) and a query on email as
// sent to every shard.
func TestShardingLeavesOutUnsplittableCollections(t *testing.T) {
	d := bson.D{}
	require.NoError(t, bson.Unmarshal(configCollection(t, "shop.users", bson.D{{Key: "_id", Value: 1}}, false), &d))
	d = append(d, bson.E{Key: "unsplittable", Value: true})
	moved, err := bson.Marshal(d)
	require.NoError(t, err)
	keys, err := shardKeysOf("shop", []bson.Raw{moved, configCollection(t, "shop.orders", bson.D{{Key: "_id", Value: 1}}, false)})
	require.NoError(t, err)
	require.Equal(t, map[string]shard.Key{"orders": {{Path: "_id"}}}, keys, "users is tracked, not sharded")

	db := mongotest.Client().Database("shop")
	fs, err := shardingFindings(shard.Cluster{Version: patterns.Version{Major: 8}, Keys: keys}, "shop", []patterns.Index{
		{Collection: db.Collection("users"), Model: mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}},
		{Collection: db.Collection("orders"), Model: mongo.IndexModel{Keys: bson.D{{Key: "customer", Value: 1}}}},
	})
	require.NoError(t, err)
	require.Len(t, fs, 1, "%v", fs)
	require.Equal(t, "orders", fs[0].Collection, "the sharded collection still gets its finding")
}

// TestShardingQuietOnTheRecommendedKeys: the indexes the packages declare
// raise no finding under the keys their Sharding sections recommend: the
// index on start that DeleteBefore sweeps every series with, the TTL index
// (which serves no query: each shard deletes its own expired documents),
// and versioning's index on the version, which MigrateAll and Stats scan
// by design.
func TestShardingQuietOnTheRecommendedKeys(t *testing.T) {
	db := mongotest.Client().Database("shop")
	readings := db.Collection("readings")
	users := db.Collection("users")
	declared := []patterns.Index{
		{Collection: readings, Model: mongo.IndexModel{Keys: bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: 1}, {Key: "count", Value: 1}}}},
		{Collection: readings, Model: mongo.IndexModel{Keys: bson.D{{Key: "start", Value: 1}}}, EveryShard: "DeleteBefore names no series"},
		{Collection: readings, Model: mongo.IndexModel{Keys: bson.D{{Key: "last", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)}},
		{Collection: users, Model: mongo.IndexModel{Keys: bson.D{{Key: "schemaVersion", Value: 1}}}, EveryShard: "MigrateAll scans by version"},
	}
	keys := map[string]shard.Key{
		"readings": shard.MustParseKey(bson.D{{Key: "meta", Value: "hashed"}, {Key: "start", Value: 1}}),
		"users":    shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}}),
	}
	for _, c := range shard.Clusters(keys) {
		fs, err := shardingFindings(c, "shop", declared)
		require.NoError(t, err)
		require.Empty(t, fs, "%s", c)
	}
	// The same index without EveryShard is reported, and the remedy does
	// not tell to shard on the field.
	fs, err := shardingFindings(shard.Clusters(keys)[0], "shop", []patterns.Index{{Collection: users, Model: mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}}}})
	require.NoError(t, err)
	require.Len(t, fs, 1)
	require.Equal(t, RuleShardKeyDeclaredQueries, fs[0].Rule)
	require.Contains(t, fs[0].Remedy, "recommends")
}
