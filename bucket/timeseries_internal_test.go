package bucket

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestInsertsAreNotRetriedOnDuplicateKeys: TimeSeries.AddMany inserts
// documents with new ids, so a duplicate key can only come from a unique
// index of the user's, and sending the insert again cannot help: the
// failure is reported at once, as the server gave it, not as a conflict
// about bucket keys. (A plain collection stands in for the time-series
// collection, which the dev server lacks: the insert path is the same.)
func TestInsertsAreNotRetriedOnDuplicateKeys(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("readings")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	require.NoError(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "k", Value: 2}})
	require.NoError(t, err)
	s := &settings{coll: coll, timeField: "at", metaField: "meta", cap: 1}
	c := mongotest.NewCounter(t, db)
	var models []mongo.WriteModel
	for k := range 3 {
		models = append(models, mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "k", Value: k + 1}, {Key: "at", Value: time.Now()}}))
	}
	var insertErr error
	require.Equal(t, []string{"insert"}, c.Count(func() { insertErr = s.insertAll(ctx, models) }), "one insert, no retry")
	pe, ok := errors.AsType[*PartialError](insertErr)
	require.True(t, ok, "%v", insertErr)
	require.Equal(t, []int{1}, pe.Failed)
	require.True(t, mongo.IsDuplicateKeyError(insertErr))
	require.NotErrorIs(t, insertErr, patterns.ErrConflict, "no hint about bucket keys")
	n, err := coll.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "the others are stored")
}
