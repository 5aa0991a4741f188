package versioning_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// capture returns a database named as db on a client of its own that
// records every command it sends, and the function returning them.
func capture(t *testing.T, db *mongo.Database) (*mongo.Database, func() []bson.Raw) {
	var mu sync.Mutex
	var sent []bson.Raw
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.DatabaseName == db.Name() {
			mu.Lock()
			sent = append(sent, slices.Clone(e.Command))
			mu.Unlock()
		}
	}}
	c := mongotest.Connect(t, mongotest.URI(), mon, nil)
	return c.Database(db.Name()), func() []bson.Raw {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sent)
	}
}

// TestAttackUpdateCollationUnderHashedID: versioning/doc.go, Sharding:
// "Shard it on {_id: "hashed"}: every operation that names a document
// (Get, Insert, Replace, Update, Delete, ...) carries its _id by equality
// and goes to one shard"; the doc limits the collation caveat to "another
// shard key" ("An exact _id is one with the simple collation: Update with
// a collation option ... on a string _id is no exact _id, and MongoDB
// refuses it (72) under such a key"). Update passes the caller's
// collation through to its updateOne (update.go).
//
// Reference (mongodb/mongo): src/mongo/s/chunk_manager.cpp
// ChunkManager::findIntersectingChunk throws ShardKeyNotFound under a
// non-simple collation for the pattern's hashed field ("the hash value
// could have come from a collatable type"; only findAndModify passes
// bypassIsFieldHashedCheck); shard_key_pattern_query_util.cpp then takes
// the bounds of the key with a null collator, [MinKey, MaxKey] for a
// string under another collation; collection_routing_info_targeter.cpp
// targetUpdate requires, for a {multi: false} update reaching several
// shards, isExactIdQuery, false for a string _id whose collation is not
// the collection's: 72 on 6.0, 7.0 and FCV 7.0; a two-phase write to
// every shard at FCV 7.1+. Never one shard.
//
// internal/shard routes this command to one shard (its rule exempts
// hashed fields: see TestAttackCollationOnHashedKey), so
// TestShardingRoutes would not see it; this test asserts the reference.
func TestAttackUpdateCollationUnderHashedID(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db0, coll := usersDB(t)
		seed(t, coll, v3("c", "Barbara", "Liskov", "barbara@example.com"))
		db, sent := capture(t, db0)
		r := newUsers(t, db, p)
		err := r.Update(ctx, "c", incVisits, options.UpdateOne().SetCollation(&options.Collation{Locale: "fr"}))
		t.Logf("Update with {locale: fr}: %v", err)
		for _, cluster := range shard.Clusters(map[string]shard.Key{
			"users": shard.MustParseKey(bson.D{{Key: "_id", Value: "hashed"}}),
		}) {
			for _, cmd := range sent() {
				var d struct {
					Update  string `bson:"update"`
					Updates []struct {
						Q         bson.D `bson:"q"`
						Multi     bool   `bson:"multi"`
						Collation bson.D `bson:"collation"`
					} `bson:"updates"`
				}
				if bson.Unmarshal(cmd, &d) != nil || d.Update != "users" {
					continue
				}
				for _, s := range d.Updates {
					if s.Multi || len(s.Collation) == 0 {
						continue
					}
					var id any
					for _, e := range s.Q {
						if e.Key == "_id" {
							id = e.Value
						}
					}
					if _, str := id.(string); !str {
						continue
					}
					want := "refused (72 InvalidOptions)"
					if cluster.WritesWithoutShardKey() {
						want = "a two-phase write to every shard"
					}
					got, _ := cluster.Route(cmd)
					t.Errorf("%s: Update sends a single update by the string _id %q with the collation %v under {_id: \"hashed\"}: mongos: %s; the package says one shard; internal/shard says %s\n%s",
						cluster, id, s.Collation, want, got, cmd)
				}
			}
		}
	})
}
