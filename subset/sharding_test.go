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
		for _, v := range []patterns.Version{{Major: 6}, {Major: 8}} {
			// (a) The keys the package documents.
			c.RequireTargeted(t, shard.Cluster{Version: v, Keys: map[string]shard.Key{
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
			byID := shard.Cluster{Version: v, Keys: map[string]shard.Key{"parents": hashedID, "items": hashedID}}
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
