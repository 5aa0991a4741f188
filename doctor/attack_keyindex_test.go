package doctor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestAttackSupportsComparesDirectionsByValue: shardkey.go's supports
// promises "its key starts with the shard key's fields in order, each with
// the same value (1, or "hashed")", citing shard_key_index_util.cpp
// isCompatibleWithShardKey. The server compares the values themselves:
// "if (!shardKey.isPrefixOf(desc->keyPattern(),
// SimpleBSONElementComparator::kInstance)) reasons |= kErrorNotPrefix"
// (mongodb/mongo src/mongo/db/s/shard_key_index_util.cpp) -- BSONObj
// isPrefixOf compares each element, name and value, so 1 and 1.0 are equal
// but 1 and 2 (an ascending index createIndexes accepts) are not:
// shardCollection of a collection holding documents finds no index for
// {a: 1} in {a: 2} and refuses it ("Please create an index that starts
// with the proposed shard key before sharding the collection", shard_key_util.cpp
// validateShardKeyIndexExistsOrCreateIfPossible, step 5). The doctor's
// parseKey folds every positive number to direction 1, so it reports the
// key supported and raises no shard-key-index finding.
func TestAttackSupportsComparesDirectionsByValue(t *testing.T) {
	fields, err := ShardKey{Collection: "c", Key: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}.fields()
	require.NoError(t, err)
	for _, idx := range []bson.D{
		{{Key: "a", Value: 2}, {Key: "b", Value: 1}},
		{{Key: "a", Value: 1}, {Key: "b", Value: 0.5}},
	} {
		b, err := bson.Marshal(idx)
		require.NoError(t, err)
		key, err := parseKey(b)
		require.NoError(t, err)
		require.False(t, supports(indexSpec{Name: "i", Key: key}, fields),
			"index %v does not support the shard key {a: 1, b: 1}: isPrefixOf compares the values (shard_key_index_util.cpp isCompatibleWithShardKey)", idx)
	}
}

// TestAttackShardKeyIndexFindingDirectionTwo: the same through
// AnalyzeShardKey, whose godoc promises it lists the indexes "to find an
// index that supports the key (shardCollection needs one on a collection
// that holds documents)": a collection holding documents whose only index
// on a is {a: 2} has no index shardCollection accepts for {a: 1}
// (shard_key_index_util.cpp isCompatibleWithShardKey, isPrefixOf by
// value), so a shard-key-index warning is due.
func TestAttackShardKeyIndexFindingDirectionTwo(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("full")
	_, err := coll.InsertMany(ctx, []bson.D{{{Key: "a", Value: 1}}, {{Key: "a", Value: 2}}})
	require.NoError(t, err)
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 2}}}); err != nil {
		t.Skipf("the server refuses the index {a: 2}: %v", err)
	}
	rep, err := AnalyzeShardKey(ctx, db, ShardKey{Collection: "full", Key: bson.D{{Key: "a", Value: 1}}}, Options{})
	require.NoError(t, err)
	var got []Finding
	for _, f := range rep.Findings {
		if f.Rule == RuleShardKeyIndex {
			got = append(got, f)
		}
	}
	require.Len(t, got, 1, "no index supports {a: 1}: {a: 2} is no prefix by value (shard_key_index_util.cpp); findings: %v", rep.Findings)
	require.Equal(t, Warning, got[0].Severity)
}
