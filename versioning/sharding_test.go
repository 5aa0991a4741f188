package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TestShardingRoutes runs every operation of the repository that sends
// commands, on old and current documents, and routes what it sent: under
// the key the package documentation recommends ({_id: "hashed"}), and
// under another key ({tenant: 1, _id: 1}) named in Config.ShardKey, on
// each cluster of shard.Clusters (6.0 to 8.0, with each FCV). Nothing is refused under either; what goes to
// every shard is what the documentation says.
func TestShardingRoutes(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		tenant := func(d bson.D) bson.D { return append(d, bson.E{Key: "tenant", Value: "acme"}) }
		seed(t, coll, tenant(v1("g", "Ada Lovelace", "ada@example.com")), tenant(v2("u", "Alan Turing", "alan@example.com")),
			tenant(v1("m", "Grace Hopper", "grace@example.com")), tenant(v3("c", "Barbara", "Liskov", "barbara@example.com")),
			tenant(v1("d", "Edsger Dijkstra", "edsger@example.com")))
		r := newUsers(t, db, p, func(c *versioning.Config) { c.ShardKey = []string{"tenant"} })
		c := mongotest.NewCounter(t, db)

		_, err := r.Get(ctx, "g") // an old document: read, then its write-back
		require.NoError(t, err)
		require.NoError(t, r.Update(ctx, "u", incVisits)) // old: read, write-back, update
		require.NoError(t, r.Update(ctx, "c", incVisits)) // current: the update alone
		require.NoError(t, r.Replace(ctx, "c", User{ID: "c", First: "Barbara", Last: "Liskov", Email: "b@example.com", Locale: "en"}))
		var replaced bson.M
		require.NoError(t, db.Collection("users").FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&replaced))
		require.Equal(t, "acme", replaced["tenant"], "Replace keeps the stored key field that User lacks")
		_, err = r.Insert(ctx, User{ID: "n", First: "New", Last: "User", Email: "n@example.com", Locale: "en"})
		require.NoError(t, err)
		require.NoError(t, r.Delete(ctx, "n"))
		for _, err := range r.Find(ctx, bson.D{}) {
			require.NoError(t, err)
		}
		_, err = r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		_, err = r.Stats(ctx)
		require.NoError(t, err)

		// (a) The recommended key: every command that names a document
		// holds its _id by equality.
		for _, cluster := range shard.Clusters(map[string]shard.Key{
			"users": shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}}),
		}) {
			t.Log(c.RequireTargeted(t, cluster, map[string]string{
				"find users":      "Find and MigrateAll's pages hold no _id by equality (package doc, Sharding)",
				"aggregate users": "Stats and MigrateAll's count aggregate every shard",
			}))
		}
		// (b) Another key, named in Config.ShardKey: the writes that
		// follow a read carry it (Replace reads first); those that follow
		// no read (Get, Delete, Update of a current document) hold the
		// exact _id and go to every shard, as the documentation says.
		// Nothing is refused: the findAndModify of the portable plan and
		// Replace's replacement carry the key too.
		for _, cluster := range shard.Clusters(map[string]shard.Key{
			"users": shard.MustParseKey(bson.D{{Key: "tenant", Value: 1}, {Key: "_id", Value: 1}}),
		}) {
			t.Log(c.RequireTargeted(t, cluster, map[string]string{
				"find users":      "Get and Replace read by _id alone; Find and MigrateAll's pages hold no key",
				"aggregate users": "Stats and MigrateAll's count aggregate every shard",
				"update users":    "Update of a current document holds the exact _id alone",
				"delete users":    "Delete holds the exact _id alone",
			}))
		}
	})
}
