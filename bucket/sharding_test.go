package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
)

// TestShardingRoutes runs every operation of Buckets that sends commands
// and routes what it sent under the shard key of the package
// documentation and under a hashed _id, on each cluster of
// shard.Clusters. (The fault tests of AddMany and Add route the commands
// of the failed calls and of their retries likewise.) (TimeSeries sends its commands
// to a native time-series collection, whose shard key MongoDB restricts
// to the metaField and the timeField.)
func TestShardingRoutes(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		c := mongotest.NewCounter(t, db)
		s := newBucketsOn(t, db, p, config(3))
		for i := range 4 {
			require.NoError(t, s.Add(ctx, "d1", readingAt(at(time.Duration(i)*time.Minute), i)))
		}
		require.NoError(t, s.AddMany(ctx, []bucket.Point[string, reading]{
			{Meta: "d1", Value: readingAt(at(2*time.Hour), 1)},
			{Meta: "d2", Value: readingAt(at(time.Hour), 2)},
		}))
		collect(t, s.Range(ctx, "d1", base, at(3*time.Hour)))
		collect(t, s.Summaries(ctx, "d1", base, at(3*time.Hour), time.Hour))
		require.NoError(t, s.DeleteSeriesBefore(ctx, "d1", at(time.Hour)))
		require.NoError(t, s.DeleteBefore(ctx, at(90*time.Minute)))

		requireRecommended(t, c)
		// On a hashed _id, the upsert into the open bucket is refused
		// without the writes without the shard key (before 7.1, or an FCV
		// below 7.1: 61) and a two-phase write with them; every read goes
		// to every shard.
		hashedID := shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}})
		for _, cluster := range shard.Clusters(map[string]shard.Key{"readings": hashedID}) {
			var refused map[string][]int32
			if !cluster.WritesWithoutShardKey() {
				refused = map[string][]int32{"update readings": {61}}
			}
			c.RequireRefused(t, cluster, map[string]string{
				"find readings":      "reads by series",
				"aggregate readings": "Summaries by series",
				"delete readings":    "deletes by series and time",
				"insert readings":    "AddMany inserts several buckets",
				"update readings":    "from 7.1, an upsert without the shard key is a two-phase write",
			}, refused)
		}
	})
}

// recommended is the shard key the package documentation recommends.
var recommended = map[string]shard.Key{
	"readings": shard.MustParseKey(bson.D{{Key: "meta", Value: "hashed"}, {Key: "start", Value: 1}}),
}

// requireRecommended routes every command c counted under the key the
// package documents, on each cluster of shard.Clusters: nothing is
// refused, and what goes to several shards is what the documentation
// says.
func requireRecommended(t *testing.T, c *mongotest.Counter) {
	t.Helper()
	require.NotZero(t, c.N(), "commands to route")
	for _, cluster := range shard.Clusters(recommended) {
		c.RequireTargeted(t, cluster, map[string]string{
			"find readings":      "Range, Summaries, the reads of open buckets and a retry's read of what applied name one series: a prefix of the key, the shards owning its chunks",
			"aggregate readings": "Summaries names one series: a prefix of the key",
			"delete readings":    "DeleteSeriesBefore names one series (a prefix of the key); DeleteBefore names none and goes to every shard",
			"insert readings":    "AddMany inserts the buckets of several series",
			"update readings":    "AddMany writes the buckets of several series in one command",
		})
	}
}
