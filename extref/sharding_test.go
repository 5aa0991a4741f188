package extref_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestShardingRoutes runs every operation that sends commands, but Watch
// (a change stream, opened on mongos against every shard, which no server
// here has), and routes what it sent under the shard keys of the package
// documentation, under a hashed _id on every collection, and with the
// source sharded on another field: refused before 7.1 without
// Config.ShardKey, targeted with it (issue 25).
func TestShardingRoutes(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, r := withCarts(t, 4, 6, p)
		_, err := db.Collection("products").UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "category", Value: "tools"}}}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		_, err = r.Of(ctx, 1)
		require.NoError(t, err)
		rename(t, db.Collection("products"), 2, "Renamed behind its back")
		rename(t, db.Collection("products"), 3, "Renamed, for Repair")
		c.Reset() // the test's own renames are not the package's
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		_, err = r.Of(ctx, 1)
		require.NoError(t, err)
		_, err = r.Sync(ctx, 2)
		require.NoError(t, err)
		_, err = r.Update(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Updated"}}}})
		require.NoError(t, err)
		_, err = r.Verify(ctx)
		require.NoError(t, err)
		_, err = r.Repair(ctx)
		require.NoError(t, err)

		// The same source, sharded on {category: 1}, named in
		// Config.ShardKey.
		keyed, err := extref.New[ProductRef](db, extref.Config{Source: "products", Targets: []extref.Target{
			{Collection: "carts", Path: "items[].product"},
			{Collection: "featured", Path: "product"},
		}, ShardKey: []string{"category"}})
		require.NoError(t, err)
		extref.ForcePlan(keyed, p)
		k := mongotest.NewCounter(t, db)
		_, err = keyed.Update(ctx, 2, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Keyed"}}}})
		require.NoError(t, err)

		hashedID := shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}})
		scans := map[string]string{
			"find carts":    "Verify, Repair and the portable path read the documents holding copies: a copy inside an array cannot be a shard key",
			"update carts":  "Sync rewrites the copies inside arrays, by the copy's id: every shard",
			"find featured": "Verify and Repair page through every target on _id",
			"find products": "Verify reads the sources of a batch of copies by an $in of their ids",
		}
		for _, base := range shard.Clusters(nil) {
			// (a) The keys the package documents: the source on a hashed
			// _id, a single target on the copy's id.
			c.RequireTargeted(t, shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{
				"products": hashedID,
				"carts":    hashedID,
				"featured": shard.MustParseKey(bson.D{{Key: "product.id", Value: "hashed"}}),
			}}, scans)
			// (b) Every collection on a hashed _id.
			byID := map[string]string{"update featured": "Sync rewrites the copies of a target not sharded on the copy's id on every shard"}
			for k, why := range scans {
				byID[k] = why
			}
			c.RequireTargeted(t, shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{
				"products": hashedID, "carts": hashedID, "featured": hashedID,
			}}, byID)
			// (c) The source sharded on another field: Update's
			// findAndModify by _id is refused before 7.1.
			other := shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{
				"products": shard.MustParseKey(bson.D{{Key: "category", Value: 1}}),
				"carts":    hashedID, "featured": hashedID,
			}}
			byID["find products"] = "the source is read by _id, not by its shard key"
			byID["findAndModify products"] = "from 7.1, a findAndModify without the shard key is a two-phase write"
			var refused map[string][]int32
			if !other.WritesWithoutShardKey() {
				refused = map[string][]int32{"findAndModify products": {61}}
			}
			c.RequireRefused(t, other, byID, refused)
			// (d) The same, with Config.ShardKey: Update reads the key
			// by _id (every shard), then its findAndModify holds the
			// key and goes to one shard, at 6.0 as at 8.0.
			delete(byID, "findAndModify products")
			byID["find products"] = "Update reads the source's shard-key values by _id"
			t.Log(k.RequireTargeted(t, other, byID))
		}
	})
}
