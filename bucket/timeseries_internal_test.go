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

// TestTimeSeriesIndexOnExistingCollections: the index {<meta>: 1,
// <time>: 1} is created on a collection that existed whatever the
// server's version (MongoDB 6.3+ builds it only for a collection it
// creates), and on a new one only before 6.3; Indexes names it, so that
// EnsureIndexes can repair a collection that lost it.
func TestTimeSeriesIndexOnExistingCollections(t *testing.T) {
	before63, since63 := plan{timeSeries: true}, plan{timeSeries: true, timeSeriesBucketing: true}
	require.True(t, indexAfterCreate(before63, false), "a new collection before 6.3")
	require.False(t, indexAfterCreate(since63, false), "a new collection on 6.3+: the server builds it")
	require.True(t, indexAfterCreate(before63, true), "an existing collection before 6.3")
	require.True(t, indexAfterCreate(since63, true), "an existing collection on 6.3+")

	ts, err := newTimeSeries[string, struct {
		At time.Time `bson:"at"`
	}](mongotest.DB(t), Config{Collection: "readings", TimeField: "at"})
	require.NoError(t, err)
	ixs := ts.Indexes()
	require.Len(t, ixs, 1)
	require.Equal(t, "readings", ixs[0].Collection.Name())
	require.Equal(t, bson.D{{Key: "meta", Value: 1}, {Key: "at", Value: 1}}, ixs[0].Model.Keys)
}

// TestTimeSeriesDistrustsItsCollection: the store forgets that it created
// its collection when a command finds it missing (NamespaceNotFound, as
// a command error or a write error), and after recheckCollection; any
// other error leaves what it knows.
func TestTimeSeriesDistrustsItsCollection(t *testing.T) {
	ts := &TimeSeries[string, struct{}]{}
	known := func() bool {
		_, err := ts.created.Get(context.Background(), func(context.Context) (time.Time, error) { return time.Time{}, errors.New("not known") })
		return err == nil
	}
	for name, err := range map[string]error{
		"command error": mongo.CommandError{Code: codeNamespaceNotFound, Message: "ns not found"},
		"write error":   mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: codeNamespaceNotFound}}},
		"bulk write":    mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: codeNamespaceNotFound}}}},
		"in a partial":  &PartialError{Failed: []int{0}, Err: mongo.WriteError{Code: codeNamespaceNotFound}},
	} {
		ts.created.Set(time.Now())
		require.Equal(t, err, ts.distrust(err), name)
		require.False(t, known(), "%s: forgotten", name)
	}
	ts.created.Set(time.Now())
	_ = ts.distrust(mongo.CommandError{Code: 11000})
	require.True(t, known(), "another error: kept")
	require.Equal(t, time.Minute, recheckCollection)
}

// TestTimeSeriesRecreatesItsCollection: after recheckCollection, the next
// call creates the collection again, or checks it; a collection dropped
// meanwhile is created again as a time-series collection, not implicitly
// by the insert. Where the server answers create with time-series options
// (FerretDB 2.x, silently making a plain collection), this pins the
// commands: create then insert, then again create then insert once the
// check is older than recheckCollection.
func TestTimeSeriesRecreatesItsCollection(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	ts := forcedTimeSeries(t, db)
	c := mongotest.NewCounter(t, db)
	var err error
	sent := c.Count(func() { err = ts.Add(ctx, "s1", tsReading{At: time.Now(), V: 1}) })
	if errors.Is(err, patterns.ErrUnsupported) {
		t.Skipf("skipped: %s lacks %s (create with time-series options)", mongotest.Server(), patterns.FeatureTimeSeries)
	}
	require.NoError(t, err)
	require.Equal(t, []string{"create", "insert"}, sent)
	require.Equal(t, []string{"insert"}, c.Count(func() { require.NoError(t, ts.Add(ctx, "s1", tsReading{At: time.Now(), V: 2})) }), "trusted")

	require.NoError(t, db.Collection("readings").Drop(ctx))
	ts.created.Set(time.Now().Add(-recheckCollection - time.Second))
	require.Equal(t, []string{"create", "insert"}, c.Count(func() { require.NoError(t, ts.Add(ctx, "s1", tsReading{At: time.Now(), V: 3})) }), "created again, explicitly")
}

// TestTimeSeriesMeasurementLimit: a measurement document past 4 MiB,
// which a time-series collection refuses, is ErrTooLarge before anything
// is sent; one just within is built.
func TestTimeSeriesMeasurementLimit(t *testing.T) {
	type blob struct {
		At   time.Time `bson:"at"`
		Data []byte    `bson:"data"`
	}
	ts, err := newTimeSeries[string, blob](mongotest.DB(t), Config{Collection: "readings", TimeField: "at"})
	require.NoError(t, err)
	// {meta: "s1", at: date, data: binary}: 4 + 11 + 11 + 11 + len + 1.
	fixed := 4 + (1 + 5 + 4 + 3) + (1 + 3 + 8) + (1 + 5 + 4 + 1) + 1
	doc, err := ts.document("s1", blob{At: time.Now(), Data: make([]byte, maxMeasurementSize-fixed)})
	require.NoError(t, err)
	raw, err := bson.Marshal(doc)
	require.NoError(t, err)
	require.Len(t, raw, maxMeasurementSize, "the largest document taken")
	_, err = ts.document("s1", blob{At: time.Now(), Data: make([]byte, maxMeasurementSize-fixed+1)})
	require.ErrorIs(t, err, patterns.ErrTooLarge)
}

// TestTimeSeriesLatest: Latest is one find of the newest measurement of
// the series, by time, whatever the order of insertion; a series without
// any is ErrNotFound. (A plain collection stands in for the time-series
// collection, which no server here has: the store's check of it is taken
// as done, and the find is the same.)
func TestTimeSeriesLatest(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	ts := forcedTimeSeries(t, db)
	ts.created.Set(time.Now())
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, m := range []int{5, 90, 30} {
		_, err := db.Collection("readings").InsertOne(ctx, bson.D{{Key: "meta", Value: "s1"}, {Key: "at", Value: t0.Add(time.Duration(m) * time.Minute)}, {Key: "v", Value: float64(m)}})
		require.NoError(t, err)
	}
	c := mongotest.NewCounter(t, db)
	var got tsReading
	var err error
	require.Equal(t, []string{"find"}, c.Count(func() { got, err = ts.Latest(ctx, "s1") }))
	require.NoError(t, err)
	require.Equal(t, 90.0, got.V)
	_, err = ts.Latest(ctx, "s2")
	require.ErrorIs(t, err, patterns.ErrNotFound)
	require.EqualError(t, err, `bucket: Latest: series "s2": no measurement: not found`)
}

// tsReading is a measurement of the time-series tests that force the
// time-series plan.
type tsReading struct {
	At time.Time `bson:"at"`
	V  float64   `bson:"v"`
}

// forcedTimeSeries returns a TimeSeries of tsReading over db's readings
// collection that takes the time-series plan whatever the server.
func forcedTimeSeries(t *testing.T, db *mongo.Database) *TimeSeries[string, tsReading] {
	t.Helper()
	ts, err := newTimeSeries[string, tsReading](db, Config{Collection: "readings", TimeField: "at", Granularity: "seconds"})
	require.NoError(t, err)
	ts.planned.Set(forcedSeries(plan{timeSeries: true, timeSeriesBucketing: true}))
	return ts
}
