package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestShardingRoutes runs every operation that sends commands, an outlier
// included, and routes what it sent under the shard keys of the package
// documentation and under a hashed _id on both collections.
func TestShardingRoutes(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		c := mongotest.NewCounter(t, db)
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		for _, id := range []int{1, 2} {
			_, err := r.Insert(ctx, post{ID: id})
			require.NoError(t, err)
		}
		require.NoError(t, r.Append(ctx, 1, comments("a", 0, 2)...))
		require.NoError(t, r.Append(ctx, 1, comments("b", 0, 6)...)) // overflows
		require.NoError(t, r.Append(ctx, 2, comments("c", 0, 1)...))
		for _, id := range []int{1, 2} {
			_, _, err := r.Get(ctx, id)
			require.NoError(t, err)
			for _, err := range r.Items(ctx, id) {
				require.NoError(t, err)
			}
			_, err = r.Count(ctx, id)
			require.NoError(t, err)
			for after, first := (Cursor{}), true; first || !after.IsZero(); first = false {
				_, after, err = r.Page(ctx, id, after, 3)
				require.NoError(t, err)
			}
		}
		require.NoError(t, r.Update(ctx, 1, comment{ID: "a01", Text: "edited"}))
		require.NoError(t, r.Update(ctx, 1, comment{ID: "b04", Text: "edited"}))
		require.NoError(t, r.Remove(ctx, 1, "a00"))
		require.NoError(t, r.Remove(ctx, 1, "b05"))
		require.NoError(t, r.Delete(ctx, 1))
		require.NoError(t, r.Delete(ctx, 2))

		hashedID := shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}})
		byParent := shard.MustParseKey(bson.D{{Key: "parent", Value: "hashed"}})
		portableRemove := "the portable Remove (servers without patterns.FeaturePullConditions, never MongoDB) pulls from the overflow document by its _id"
		for _, base := range shard.Clusters(nil) {
			// (a) The keys the package documents.
			c.RequireTargeted(t, shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{
				"posts": hashedID, "posts_overflow": byParent,
			}}, map[string]string{"update posts_overflow": portableRemove})
			// (b) Both collections on a hashed _id: the unique {parent, seq}
			// index is refused (67), and so, before 7.1, are the upserts
			// that open an overflow document (61) and the native Remove
			// (72); the reads by parent go to every shard.
			byID := shard.Cluster{Version: base.Version, FCV: base.FCV, Keys: map[string]shard.Key{"posts": hashedID, "posts_overflow": hashedID}}
			refused := map[string][]int32{"createIndexes posts_overflow": {67}}
			if !byID.WritesWithoutShardKey() {
				// The upserts, and Update's and Remove's writes by parent.
				refused["update posts_overflow"] = []int32{61, 72}
			}
			c.RequireRefused(t, byID, map[string]string{
				"find posts_overflow":          "reads by parent",
				"aggregate posts_overflow":     "Get's merge reads the overflow by parent",
				"delete posts_overflow":        "Delete removes the overflow by parent",
				"update posts_overflow":        "from 7.1, a write without the shard key is a two-phase write",
				"findAndModify posts_overflow": "from 7.1, a write without the shard key is a two-phase write",
			}, refused)
		}
	})
}
