package extref_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// regional returns a fresh database holding customers, each with a
// region (the field the tests shard them on), and orders as withOrders
// stores them, with a repository whose Config.ShardKey names the region,
// on plan p.
func regional(t *testing.T, p extref.Plan) (*mongo.Database, *extref.Ref[CustomerRef]) {
	t.Helper()
	db, _ := withOrders(t, 2, 4, p)
	_, err := db.Collection("customers").UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "region", Value: "eu"}}}})
	require.NoError(t, err)
	r, err := extref.New[CustomerRef](db, extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}}, ShardKey: []string{"region"}})
	require.NoError(t, err)
	extref.ForcePlan(r, p)
	return db, r
}

// customer reads a customer as stored.
func customer(t *testing.T, db *mongo.Database, id int) bson.M {
	t.Helper()
	var c bson.M
	require.NoError(t, db.Collection("customers").FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&c))
	return c
}

// TestUpdateCarriesTheShardKey (issue 25): with Config.ShardKey, Update
// reads the key's values first, one find, then updates as without it; on
// a plan taking writes without the shard key (a mongos 7.1+ at FCV 7.1+,
// which detection cannot tell: patterns.FeatureWritesWithoutShardKey) it
// reads nothing first. The routing of those commands is TestShardingRoutes's.
func TestUpdateCarriesTheShardKey(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, r := regional(t, p)
		counter := mongotest.NewCounter(t, db)
		sent := counter.Count(func() {
			counts, err := r.Update(ctx, 1, setName("Renamed"))
			require.NoError(t, err)
			require.EqualValues(t, 2, counts[0].Modified)
		})
		want := []string{"find", "findAndModify", "update", "find"} // key, update, sync, confirm
		if has(p, patterns.FeatureTransactions) {
			want = []string{"find", "findAndModify", "update"}
		}
		require.Equal(t, want, sent)
		require.Equal(t, "Renamed", customer(t, db, 1)["name"])
		require.Equal(t, "eu", customer(t, db, 1)["region"])

		extref.ForcePlan(r, extref.Keyless(p))
		sent = counter.Count(func() {
			_, err := r.Update(ctx, 1, setName("Renamed again"))
			require.NoError(t, err)
		})
		require.Equal(t, "findAndModify", sent[0], "nothing read first where the server routes a write without the key")
		require.Equal(t, "Renamed again", customer(t, db, 1)["name"])
	})
}

// TestUpdateFollowsAMovedShardKey (issue 25): a writer that changes the
// source's key value between Update's read of it and its findAndModify
// makes the findAndModify match nothing; Update reads the key again and
// applies its update once. A source deleted in that window is not found,
// nothing written.
func TestUpdateFollowsAMovedShardKey(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, r := regional(t, p)
		other := mongotest.NewClient(t).Database(db.Name()).Collection("customers")
		var moves atomic.Int32
		mongotest.OnCommand(t, db, "findAndModify", func(ctx context.Context) {
			switch moves.Add(1) {
			case 1:
				_, err := other.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "region", Value: "us"}}}})
				require.NoError(t, err)
			case 3:
				_, err := other.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}})
				require.NoError(t, err)
			}
		})
		counter := mongotest.NewCounter(t, db)
		sent := counter.Count(func() {
			_, err := r.Update(ctx, 1, bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}})
			require.NoError(t, err)
		})
		// The other client's update is counted too, in the window.
		require.Equal(t, []string{"find", "findAndModify", "update", "find", "findAndModify"}, sent[:5])
		c := customer(t, db, 1)
		require.Equal(t, "us", c["region"])
		require.EqualValues(t, 1, c["visits"], "the update applied once")

		_, err := r.Update(ctx, 2, setName("Gone"))
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.NotErrorIs(t, err, extref.ErrNotSynced)
	})
}

// TestUpdateRefusesAnUpsertWithAShardKey (issue 25): an upsert's filter
// needs the key's values of a source that does not exist: refused before
// anything is sent.
func TestUpdateRefusesAnUpsertWithAShardKey(t *testing.T) {
	db, r := regional(t, extref.PlanFor(mongotest.Server()))
	counter := mongotest.NewCounter(t, db)
	sent := counter.Count(func() {
		_, err := r.Update(ctx, 99, setName("Upserted"), options.FindOneAndUpdate().SetUpsert(true))
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorContains(t, err, "extref: Update: source 99: upsert option with config.ShardKey")
	})
	require.Empty(t, sent)
}
