package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// BenchmarkAddManyVsInsertOne writes the same readings, one a minute, two
// ways side by side in one run: with AddMany into hourly buckets of 60,
// and with one InsertOne per reading into a collection of one document
// per reading ({meta, at, temp, hum}, indexed on {meta: 1, at: 1}, as the
// written-by-hand alternative). Each op writes 100 readings each way. It
// reports the points per second of each and their ratio, and, for all the
// readings written, the documents and bytes (the sum of the BSON
// documents' lengths, fetched raw: collStats is missing on FerretDB) each
// way stores.
func BenchmarkAddManyVsInsertOne(b *testing.B) {
	const perOp = 100
	ctx := context.Background()
	db := mongotest.DB(b)
	cfg := config(60)
	store, err := bucket.New[string, reading](db, cfg)
	require.NoError(b, err)
	flat := db.Collection("flat")
	require.NoError(b, patterns.EnsureIndexes(ctx, append(store.Indexes(), patterns.Index{
		Collection: flat, Model: mongo.IndexModel{Keys: bson.D{{Key: "meta", Value: 1}, {Key: "at", Value: 1}}},
	})...))

	type flatReading struct {
		Meta string    `bson:"meta"`
		At   time.Time `bson:"at"`
		Temp float64   `bson:"temp"`
		Hum  int64     `bson:"hum"`
	}
	var bucketed, single time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		pts := make([]bucket.Point[string, reading], perOp)
		for i := range pts {
			pts[i] = bucket.Point[string, reading]{Meta: "s1", Value: readingAt(at(time.Duration(n)*time.Minute), n)}
			n++
		}
		start := time.Now()
		require.NoError(b, store.AddMany(ctx, pts))
		bucketed += time.Since(start)

		start = time.Now()
		for _, p := range pts {
			_, err := flat.InsertOne(ctx, flatReading{Meta: p.Meta, At: p.Value.At, Temp: p.Value.Temp, Hum: p.Value.Hum})
			require.NoError(b, err)
		}
		single += time.Since(start)
	}
	addMany, insertOne := float64(n)/bucketed.Seconds(), float64(n)/single.Seconds()
	b.ReportMetric(addMany, "addmany-points/s")
	b.ReportMetric(insertOne, "insertone-points/s")
	b.ReportMetric(addMany/insertOne, "speedup-x")

	bucketDocs, bucketBytes := storage(b, db.Collection(cfg.Collection))
	flatDocs, flatBytes := storage(b, flat)
	b.ReportMetric(float64(bucketDocs), "bucket-docs")
	b.ReportMetric(float64(flatDocs), "flat-docs")
	b.ReportMetric(float64(bucketBytes)/float64(n), "bucket-bytes/point")
	b.ReportMetric(float64(flatBytes)/float64(n), "flat-bytes/point")
	b.ReportMetric(float64(flatBytes)/float64(bucketBytes), "bytes-saved-x")
}

// storage counts the documents of coll and sums their BSON lengths.
func storage(b *testing.B, coll *mongo.Collection) (docs, bytes int) {
	b.Helper()
	cur, err := coll.Find(context.Background(), bson.D{})
	require.NoError(b, err)
	defer cur.Close(context.Background())
	for cur.Next(context.Background()) {
		docs++
		bytes += len(cur.Current)
	}
	require.NoError(b, cur.Err())
	return docs, bytes
}
