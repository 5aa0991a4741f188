package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

func TestShardingRoutes(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		insertParents(t, db, "p1", "p2")
		c := mongotest.NewCounter(t, db)
		r := newRepo[parent, item](t, db, config(2), p)
		require.NoError(t, r.Add(ctx, "p1", item{ID: 1, Score: 5}, item{ID: 2, Score: 7}, item{ID: 3, Score: 1}))
		require.ErrorIs(t, r.Add(ctx, "missing", item{ID: 9, Score: 1}), patterns.ErrNotFound)
		_, err := r.Get(ctx, "p1")
		require.NoError(t, err)
		for _, err := range r.All(ctx, "p1") {
			require.NoError(t, err)
		}
		_, _, err = r.Page(ctx, "p1", subset.Cursor{}, 2)
		require.NoError(t, err)
		require.NoError(t, r.Update(ctx, "p1", item{ID: 3, Score: 9}))
		require.NoError(t, r.Remove(ctx, "p1", 2))
		require.NoError(t, r.Rebuild(ctx, "p1"))
		_, err = r.RebuildAll(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, r.Delete(ctx, "p1"))

		hashedID := shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}})
		for _, base := range shard.Clusters(nil) {
			// (a) The keys the package documents.
			c.RequireTargeted(t, shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{
				"parents": hashedID,
				"items":   shard.MustParseKey(bson.D{{Key: "parent", Value: "hashed"}, {Key: "_id", Value: 1}}),
			}}, map[string]string{
				"find items":      "All, Page and the recomputation read one parent's items: equality on the key's prefix, the shards owning that parent's chunks",
				"insert items":    "the items of an Add of several go to the shards owning their parent's chunks",
				"aggregate items": "Add's count of the items it pushed names the parent and their ids: one shard per item at most",
				"delete items":    "Delete removes a parent's items by parent, a prefix of the key",
				"find parents":    "RebuildAll pages through every parent",
			})
			// (b) Both collections on a hashed _id.
			byID := shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{"parents": hashedID, "items": hashedID}}
			c.RequireTargeted(t, byID, map[string]string{
				"insert items":    "the items of an Add go each to the shard of its _id",
				"aggregate items": "Add's count of the items it pushed names their ids: one shard per item at most",
				"find items":      "reads of the full set by parent go to every shard",
				"find parents":    "RebuildAll pages through every parent",
				"delete items":    "Delete removes a parent's items by parent: every shard",
			})
		}
	})
}

// TestShardingRoutesByIDField: with IDField other than _id, the items
// sharded on the key the package documents ({<ParentField>: "hashed",
// <IDField>: 1}) take every command to one shard or to the shards of one
// parent; on {_id: "hashed"} mongos refuses the unique index of Indexes
// (67) and, without the writes without the shard key, Remove's delete by
// {parent, <IDField>} (61); Update's replacement by it, holding no _id,
// goes to the shard of hash(null), where it keeps the item's _id (no
// 31025; no match elsewhere: internal/shard's TestReplacementWithoutID).
// With the writes without the shard key both are two-phase writes, as
// the package documentation says.
func TestShardingRoutesByIDField(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		_, err := db.Collection("polls").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "p"}}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		r := newRepo[poll, vote](t, db, subset.Config{
			Parents: "polls", Field: "votes", Items: "votes", ParentField: "poll",
			IDField: "author", SortField: "weight", Descending: true, Cap: 2,
		}, p)
		require.NoError(t, r.Add(ctx, "p", vote{Author: "ann", Weight: 1}, vote{Author: "bob", Weight: 3}, vote{Author: "cy", Weight: 2}))
		require.NoError(t, r.Update(ctx, "p", vote{Author: "ann", Weight: 9}))
		require.NoError(t, r.Remove(ctx, "p", "bob"))
		_, err = r.Get(ctx, "p")
		require.NoError(t, err)

		hashedID := shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}})
		for _, cluster := range shard.Clusters(map[string]shard.Key{
			"polls": hashedID,
			"votes": shard.MustParseKey(bson.D{{Key: "poll", Value: "hashed"}, {Key: "author", Value: 1}}),
		}) {
			c.RequireTargeted(t, cluster, map[string]string{
				"find votes":      "the recomputation reads one parent's items: a prefix of the key",
				"insert votes":    "an Add of several items goes to the shards owning their parent's chunks",
				"aggregate votes": "Add's count of the items it pushed names the parent and their ids: one shard per item at most",
			})
		}
		for _, cluster := range shard.Clusters(map[string]shard.Key{"polls": hashedID, "votes": hashedID}) {
			refused := map[string][]int32{"createIndexes votes": {67}, "delete votes": {61}}
			if cluster.WritesWithoutShardKey() {
				refused = map[string][]int32{"createIndexes votes": {67}}
			}
			c.RequireRefused(t, cluster, map[string]string{
				"find votes":      "reads by parent go to every shard",
				"insert votes":    "the items of an Add go each to the shard of its _id",
				"aggregate votes": "Add's count of the items it pushed names the parent and their ids, not the _id: every shard",
				"delete votes":    "Remove by {parent, IDField}: a two-phase write (7.1+ at FCV 7.1+)",
				"update votes":    "Update's replacement by {parent, IDField}: a two-phase write (7.1+ at FCV 7.1+)",
			}, refused)
		}
	})
}
