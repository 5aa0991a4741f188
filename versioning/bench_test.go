package versioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// benchDocs is the collection size of the MigrateAll benchmark: small,
// because on FerretDB every guarded write scans the collection.
const benchDocs = 200

// reseed empties the collection and fills it with benchDocs v1 documents.
func reseed(b *testing.B, coll *mongo.Collection) {
	b.Helper()
	ctx := context.Background()
	_, err := coll.DeleteMany(ctx, bson.D{})
	require.NoError(b, err)
	docs := make([]any, benchDocs)
	for i := range docs {
		docs[i] = v1(fmt.Sprintf("u%04d", i), "Ada Lovelace", "ada@example.com")
	}
	_, err = coll.InsertMany(ctx, docs)
	require.NoError(b, err)
}

// BenchmarkMigrateAll measures MigrateAll against the same migration done
// by hand with one guarded replaceOne per document (what a script does),
// and reports both rates and their ratio. Sub-benchmarks: the path
// MigrateAll detects for the server, and the bulk path forced (on FerretDB
// in batches of 50, under its statement limit).
func BenchmarkMigrateAll(b *testing.B) {
	for _, bc := range []struct {
		name  string
		path  writePath
		batch int
	}{{"detected", 0, 0}, {"bulk", pathBulk, 50}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			db := mongotest.DB(b)
			r := newUsers(b, db)
			coll := db.Collection("users")
			require.NoError(b, patterns.EnsureIndexes(ctx, r.Indexes()...))
			if bc.path != 0 {
				r.path.Set(bc.path)
			}
			var repo, byHand time.Duration
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				reseed(b, coll)
				start := time.Now()
				b.StartTimer()
				res, err := r.MigrateAll(ctx, MigrateOptions{BatchSize: bc.batch})
				b.StopTimer()
				repo += time.Since(start)
				require.NoError(b, err)
				require.Equal(b, benchDocs, res.Migrated)

				reseed(b, coll)
				start = time.Now()
				migrateByHand(b, r)
				byHand += time.Since(start)
				b.StartTimer()
			}
			n := float64(b.N * benchDocs)
			b.ReportMetric(n/repo.Seconds(), "docs/s")
			b.ReportMetric(n/byHand.Seconds(), "by-hand-docs/s")
			b.ReportMetric(byHand.Seconds()/repo.Seconds(), "speedup")
		})
	}
}

// migrateByHand is the baseline: read the old documents, migrate each and
// write it back with its own guarded replaceOne.
func migrateByHand(b *testing.B, r *Repo[User]) {
	ctx := context.Background()
	cur, err := r.coll.Find(ctx, r.scanFilter())
	require.NoError(b, err)
	var olds []bson.Raw
	require.NoError(b, cur.All(ctx, &olds))
	for _, raw := range olds {
		_, migrated, err := r.upgrade(raw)
		require.NoError(b, err)
		res, err := r.coll.ReplaceOne(ctx, r.casFilter(raw), migrated)
		require.NoError(b, err)
		require.EqualValues(b, 1, res.MatchedCount)
	}
}

// BenchmarkGet reads one document: at the current version (one find), and
// at version 1 with the write-back off (one find and the migration in
// memory), reporting the commands sent per read. BenchmarkFindOneByHand is
// the baseline.
func BenchmarkGet(b *testing.B) {
	for _, bc := range []struct {
		name string
		doc  bson.D
	}{
		{"current", v3("u", "Ada", "Lovelace", "ada@example.com")},
		{"v1-migrated-in-memory", v1("u", "Ada Lovelace", "ada@example.com")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			db := mongotest.DB(b)
			r := newUsers(b, db, func(c *Config) { c.NoWriteBack = true })
			seed(b, db.Collection("users"), bc.doc)
			c := mongotest.NewCounter(b, db)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Get(ctx, "u"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.N())/float64(b.N), "cmds/op")
		})
	}
}

// BenchmarkFindOneByHand is what Get of a current document replaces: the
// driver's FindOne and Decode.
func BenchmarkFindOneByHand(b *testing.B) {
	ctx := context.Background()
	db := mongotest.DB(b)
	coll := db.Collection("users")
	seed(b, coll, v3("u", "Ada", "Lovelace", "ada@example.com"))
	b.ReportAllocs()
	for b.Loop() {
		var u User
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "u"}}).Decode(&u); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpgrade is the in-memory cost of migrating one v1 document
// through both steps, encoding it and checking it decodes into T.
func BenchmarkUpgrade(b *testing.B) {
	r := newUsers(b, mongotest.Client().Database("unused"))
	raw, err := bson.Marshal(v1("u", "Ada Lovelace", "ada@example.com"))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.upgrade(raw); err != nil {
			b.Fatal(err)
		}
	}
}
