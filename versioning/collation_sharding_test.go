package versioning_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
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

// TestUpdateRefusesCollationUnderHashedID (issue 33 regression):
// Update passed the caller's collation through to its updateOne by _id,
// which versioning/doc.go said goes to one shard under {_id: "hashed"}.
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
// Update now refuses such a collation (patterns.ErrInvalid) and sends
// nothing; the route it would have taken is pinned by internal/shard's
// TestCollationOnHashedKey.
func TestUpdateRefusesCollationUnderHashedID(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db0, coll := usersDB(t)
		seed(t, coll, v3("c", "Barbara", "Liskov", "barbara@example.com"))
		db, sent := capture(t, db0)
		r := newUsers(t, db, p)
		stored := func() bson.Raw {
			raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Raw()
			require.NoError(t, err)
			return raw
		}
		doc := stored()
		before := len(sent())
		err := r.Update(ctx, "c", incVisits, options.UpdateOne().SetCollation(&options.Collation{Locale: "fr"}))
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.Empty(t, sent()[before:], "Update with {locale: fr} sent commands")
		require.Equal(t, doc, stored(), "the refused Update changed the document")
	})
}
