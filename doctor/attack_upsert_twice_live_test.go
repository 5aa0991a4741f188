package doctor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestAttackUpsertKeyMatchedTwiceLive (here for the doctor's TestMain; the rule is
// internal/shard's): the server side of internal/shard's
// TestAttackUpsertKeyMatchedTwice, on an unsharded collection (the check
// is the shard's, not mongos's): an upsert whose filter matches one path
// by equality twice cannot build its document and fails with
// NotSingleValueField (54), "cannot infer query fields to set, path
// 'status' is matched twice" (mongodb/mongo path_support.cpp
// checkEqualityConflicts). internal/shard routes it as an accepted
// one-shard upsert from 7.1. This test holds where the server shows
// MongoDB's behaviour (FerretDB 2.7); it is the evidence for
// internal/shard's TestAttackUpsertKeyMatchedTwice, which fails.
func TestAttackUpsertKeyMatchedTwiceLive(t *testing.T) {
	ctx := context.Background()
	coll := mongotest.DB(t).Collection("status")
	for _, q := range []bson.D{
		{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: "paid"}}, bson.D{{Key: "status", Value: "paid"}}}}},
		{{Key: "status", Value: bson.D{{Key: "$all", Value: bson.A{"paid", "paid"}}}}},
	} {
		_, err := coll.UpdateOne(ctx, q, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
		var we mongo.WriteException
		if err == nil {
			t.Skipf("this server accepts the upsert by %v (MongoDB refuses it, 54)", q)
		}
		require.True(t, errors.As(err, &we) && len(we.WriteErrors) == 1, "%v", err)
		t.Logf("upsert by %v: code %d: %s", q, we.WriteErrors[0].Code, we.WriteErrors[0].Message)
		require.Contains(t, we.WriteErrors[0].Message, "is matched twice")
	}
}
