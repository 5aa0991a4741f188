package bucket_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The unit of work of the AddMany benchmarks: the readings of benchSeries
// series over one hour, one a minute, into buckets of an hour (Cap 60):
// op i writes hour i, so every op fills benchSeries new buckets, as an
// ingest of live data does.
const benchSeries = 10

var benchNames = sensorNames(benchSeries)

func benchPoints(i int) []bucket.Point[string, reading] {
	pts := make([]bucket.Point[string, reading], 0, benchSeries*60)
	for m := range 60 {
		n := i*60 + m
		for s := range benchSeries {
			pts = append(pts, bucket.Point[string, reading]{Meta: benchNames[s], Value: readingAt(at(time.Duration(n)*time.Minute), n)})
		}
	}
	return pts
}

// newBenchStore returns a bucket store with its indexes on a fresh
// database.
func newBenchStore(b *testing.B) (*bucket.Buckets[string, reading], *mongo.Database) {
	db := mongotest.DB(b)
	s, err := bucket.New[string, reading](db, config(60))
	require.NoError(b, err)
	require.NoError(b, patterns.EnsureIndexes(context.Background(), s.Indexes()...))
	return s, db
}

// flatReading is one reading as a document of its own, the layout
// without buckets.
type flatReading struct {
	Meta string    `bson:"meta"`
	At   time.Time `bson:"at"`
	Temp float64   `bson:"temp"`
	Hum  int64     `bson:"hum"`
}

// BenchmarkAddManyVsInsertOne: AddMany of an hour of ten series (600
// readings that fill ten buckets) against the same readings stored by
// hand one InsertOne each, into a collection of one document per reading
// indexed on {meta: 1, at: 1}. Goal: 20x the readings per second. It also
// reports the bytes each layout stores per reading (the sum of the BSON
// documents' lengths, read back raw: collStats is missing on some
// servers) and their ratio.
func BenchmarkAddManyVsInsertOne(b *testing.B) {
	ctx := context.Background()
	var buckets, flat *mongo.Collection
	n := 0
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			s, db := newBenchStore(b)
			buckets = db.Collection("readings")
			return func(i int) {
				if err := s.AddMany(ctx, benchPoints(i)); err != nil {
					b.Fatal(err)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			flat = mongotest.DB(b).Collection("flat")
			require.NoError(b, patterns.EnsureIndexes(ctx, patterns.Index{
				Collection: flat, Model: mongo.IndexModel{Keys: bson.D{{Key: "meta", Value: 1}, {Key: "at", Value: 1}}},
			}))
			return func(i int) {
				for _, p := range benchPoints(i) {
					if _, err := flat.InsertOne(ctx, flatReading{Meta: p.Meta, At: p.Value.At, Temp: p.Value.Temp, Hum: p.Value.Hum}); err != nil {
						b.Fatal(err)
					}
				}
				n += benchSeries * 60
			}
		},
		Speed: 20,
	})
	bucketBytes, flatBytes := storedBytes(b, buckets), storedBytes(b, flat)
	b.ReportMetric(float64(bucketBytes)/float64(n), "bucket-bytes/point")
	b.ReportMetric(float64(flatBytes)/float64(n), "flat-bytes/point")
	b.ReportMetric(float64(flatBytes)/float64(bucketBytes), "bytes-saved-x")
}

// BenchmarkAddManyVsInsertMany: AddMany of an hour of ten series against
// the same buckets built by hand (measurements, count, first, last and
// summaries) and stored with one InsertMany into a collection with the
// same indexes: what AddMany does, without its read of the buckets with
// room (1.0x is the limit). Goal: 0.8x.
func BenchmarkAddManyVsInsertMany(b *testing.B) {
	ctx := context.Background()
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			s, _ := newBenchStore(b)
			return func(i int) {
				if err := s.AddMany(ctx, benchPoints(i)); err != nil {
					b.Fatal(err)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			_, db := newBenchStore(b) // the same indexes
			coll := db.Collection("readings")
			return func(i int) {
				if _, err := coll.InsertMany(ctx, readyBuckets(benchPoints(i))); err != nil {
					b.Fatal(err)
				}
			}
		},
		Speed: 0.8,
	})
}

// readyBuckets builds, by hand, the buckets of readings of one window:
// one per series (metas equal as the server compares them are one).
func readyBuckets[M any](pts []bucket.Point[M, reading]) []any {
	type stats struct{ Min, Max, Sum float64 }
	type doc struct {
		Meta    M                `bson:"meta"`
		Start   time.Time        `bson:"start"`
		First   time.Time        `bson:"first"`
		Last    time.Time        `bson:"last"`
		Count   int32            `bson:"count"`
		Summary map[string]stats `bson:"summary"`
		Points  []reading        `bson:"measurements"`
	}
	bySeries := map[string]*doc{}
	var out []any
	for _, p := range pts {
		t, v, err := bson.MarshalValue(p.Meta)
		if err != nil {
			panic(err)
		}
		key := bsonid.Key(bson.RawValue{Type: t, Value: v})
		d := bySeries[key]
		if d == nil {
			inf := stats{Min: math.Inf(1), Max: math.Inf(-1)}
			d = &doc{Meta: p.Meta, Start: p.Value.At.Truncate(time.Hour), First: p.Value.At, Last: p.Value.At, Summary: map[string]stats{"temp": inf, "hum": inf}}
			bySeries[key] = d
			out = append(out, d)
		}
		d.Count++
		d.Points = append(d.Points, p.Value)
		d.First, d.Last = minTime(d.First, p.Value.At), maxTime(d.Last, p.Value.At)
		for f, v := range map[string]float64{"temp": p.Value.Temp, "hum": float64(p.Value.Hum)} {
			st := d.Summary[f]
			d.Summary[f] = stats{min(st.Min, v), max(st.Max, v), st.Sum + v}
		}
	}
	return out
}

// BenchmarkAdd: Add against the same upsert written by hand, the reading
// given to the driver as a struct. Goal: at most 1.1x the allocations.
func BenchmarkAdd(b *testing.B) {
	ctx := context.Background()
	readingOf := func(i int) reading { return readingAt(at(time.Duration(i)*time.Minute), i) }
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			s, _ := newBenchStore(b)
			return func(i int) {
				if err := s.Add(ctx, "s1", readingOf(i)); err != nil {
					b.Fatal(err)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			coll := mongotest.DB(b).Collection("readings")
			require.NoError(b, patterns.EnsureIndexes(ctx, patterns.Index{Collection: coll, Model: mongo.IndexModel{
				Keys: bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: 1}, {Key: "count", Value: 1}},
			}}))
			upsert := options.UpdateOne().SetUpsert(true)
			return func(i int) {
				r := readingOf(i)
				hum := float64(r.Hum)
				_, err := coll.UpdateOne(ctx,
					bson.D{{Key: "meta", Value: "s1"}, {Key: "start", Value: r.At.Truncate(time.Hour)}, {Key: "count", Value: bson.D{{Key: "$lt", Value: int32(60)}}}},
					bson.D{
						{Key: "$push", Value: bson.D{{Key: "measurements", Value: r}}},
						{Key: "$inc", Value: bson.D{{Key: "count", Value: int32(1)}, {Key: "summary.temp.sum", Value: r.Temp}, {Key: "summary.hum.sum", Value: hum}}},
						{Key: "$min", Value: bson.D{{Key: "first", Value: r.At}, {Key: "summary.temp.min", Value: r.Temp}, {Key: "summary.hum.min", Value: hum}}},
						{Key: "$max", Value: bson.D{{Key: "last", Value: r.At}, {Key: "summary.temp.max", Value: r.Temp}, {Key: "summary.hum.max", Value: hum}}},
					}, upsert)
				if err != nil {
					b.Fatal(err)
				}
			}
		},
		Allocs: 1.1,
	})
}

// storedBytes sums the BSON lengths of the documents of coll.
func storedBytes(b *testing.B, coll *mongo.Collection) int {
	b.Helper()
	cur, err := coll.Find(context.Background(), bson.D{})
	require.NoError(b, err)
	defer cur.Close(context.Background())
	n := 0
	for cur.Next(context.Background()) {
		n += len(cur.Current)
	}
	require.NoError(b, cur.Err())
	return n
}

// BenchmarkLatest: Latest of one of ten series holding six hours of
// readings (a bucket an hour), against the same reads written by hand:
// the two newest buckets of the series by the index, decoded, and the
// reading with the greatest time. Goals: 0.9x the speed, 1.1x the
// allocations.
func BenchmarkLatest(b *testing.B) {
	ctx := context.Background()
	const hours = 6
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			s, _ := newBenchStore(b)
			for h := range hours {
				require.NoError(b, s.AddMany(ctx, benchPoints(h)))
			}
			return func(i int) {
				if _, err := s.Latest(ctx, benchNames[i%benchSeries]); err != nil {
					b.Fatal(err)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			coll := mongotest.DB(b).Collection("readings")
			require.NoError(b, patterns.EnsureIndexes(ctx, patterns.Index{Collection: coll, Model: mongo.IndexModel{
				Keys: bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: 1}, {Key: "count", Value: 1}},
			}}))
			for h := range hours {
				_, err := coll.InsertMany(ctx, readyBuckets(benchPoints(h)))
				require.NoError(b, err)
			}
			type head struct {
				Start  time.Time `bson:"start"`
				Points []reading `bson:"measurements"`
			}
			find := options.Find().SetSort(bson.D{{Key: "start", Value: -1}}).SetLimit(2).
				SetProjection(bson.D{{Key: "start", Value: 1}, {Key: "measurements", Value: 1}})
			return func(i int) {
				cur, err := coll.Find(ctx, bson.D{{Key: "meta", Value: benchNames[i%benchSeries]}}, find)
				if err != nil {
					b.Fatal(err)
				}
				var heads []head
				if err := cur.All(ctx, &heads); err != nil || len(heads) == 0 {
					b.Fatal(err, len(heads))
				}
				// One bucket an hour: the newest window holds one.
				var newest reading
				for _, r := range heads[0].Points {
					if !r.At.Before(newest.At) {
						newest = r
					}
				}
			}
		},
		Speed:  0.9,
		Allocs: 1.1,
	})
}

// BenchmarkSummariesBySeries: the summary of each of ten series, of six
// hours of readings (a bucket an hour), over an hour that straddles two
// windows (every bucket read straddles from or to: the library's worst
// case) and over five hours (most buckets lie inside), against what one
// writes by hand for the same numbers, its commands built per call as the
// window moves: where the server has $group $min and $max, one aggregate
// that keeps one copy of each bucket, unwinds the measurements of the
// buckets in the window and groups them by meta; elsewhere a find of
// those buckets, measurements and all, summed in Go, one copy of each.
// Both sides give the same numbers (checked before the timing).
// Goals: 0.9x the speed, 1.1x the allocations.
//
// The hand-written side keeps one copy of each bucket as the library
// must: the filter's range on last can be served by the TTL index on
// last (Config.TTL) or by an index of the user's, whose entry every
// write to the bucket moves ahead of the cursor, so that the server may
// return a bucket twice. The library's check of missing value fields
// (ValueFields grown after buckets were written) stays on its side
// only.
func BenchmarkSummariesBySeries(b *testing.B) {
	for _, w := range []struct {
		name     string
		from, to time.Time
	}{
		{"hour", at(4*time.Hour + 30*time.Minute), at(5*time.Hour + 30*time.Minute)},
		{"five-hours", at(30 * time.Minute), at(5*time.Hour + 30*time.Minute)},
	} {
		b.Run(w.name, func(b *testing.B) { benchSummariesBySeries(b, w.from, w.to) })
	}
}

func benchSummariesBySeries(b *testing.B, from, to time.Time) {
	ctx := context.Background()
	const hours = 6
	type stats struct{ Min, Max, Sum float64 }
	type row struct {
		Meta  string `bson:"_id"`
		Count int64  `bson:"count"`
		Temp  stats  `bson:"temp"`
		Hum   stats  `bson:"hum"`
	}
	var libRows []row // the library's answer, which the baseline's must equal
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			s, _ := newBenchStore(b)
			for h := range hours {
				require.NoError(b, s.AddMany(ctx, benchPoints(h)))
			}
			for sum, err := range s.SummariesBySeries(ctx, from, to) {
				require.NoError(b, err)
				t, h := sum.Values["temp"], sum.Values["hum"]
				libRows = append(libRows, row{sum.Meta, sum.Count, stats{t.Min, t.Max, t.Sum}, stats{h.Min, h.Max, h.Sum}})
			}
			return func(int) {
				n := 0
				for _, err := range s.SummariesBySeries(ctx, from, to) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != benchSeries {
					b.Fatal(n)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			coll := mongotest.DB(b).Collection("readings")
			require.NoError(b, patterns.EnsureIndexes(ctx, patterns.Index{Collection: coll, Model: mongo.IndexModel{
				Keys: bson.D{{Key: "start", Value: 1}},
			}}))
			for h := range hours {
				_, err := coll.InsertMany(ctx, readyBuckets(benchPoints(h)))
				require.NoError(b, err)
			}
			filter := func() bson.D {
				return bson.D{
					{Key: "start", Value: bson.D{{Key: "$gt", Value: from.Add(-time.Hour)}, {Key: "$lt", Value: to}}},
					{Key: "first", Value: bson.D{{Key: "$lt", Value: to}}},
					{Key: "last", Value: bson.D{{Key: "$gte", Value: from}}},
				}
			}
			check := func(rows []row, err error) {
				if err != nil || len(rows) != benchSeries {
					b.Fatal(err, len(rows))
				}
			}
			if mongotest.Server().Has(patterns.FeatureGroupMinMaxAvg) {
				acc := func(f string) bson.D {
					return bson.D{{Key: "$sum", Value: "$measurements." + f}}
				}
				pipeline := func() mongo.Pipeline {
					return mongo.Pipeline{
						{{Key: "$match", Value: filter()}},
						{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "b", Value: bson.D{{Key: "$max", Value: bson.D{
							{Key: "count", Value: "$count"}, {Key: "meta", Value: "$meta"}, {Key: "measurements", Value: "$measurements"},
						}}}}}}},
						{{Key: "$replaceWith", Value: "$b"}},
						{{Key: "$unwind", Value: "$measurements"}},
						{{Key: "$match", Value: bson.D{{Key: "measurements.at", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}}}}},
						{{Key: "$group", Value: bson.D{
							{Key: "_id", Value: "$meta"},
							{Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}},
							{Key: "tsum", Value: acc("temp")},
							{Key: "tmin", Value: bson.D{{Key: "$min", Value: "$measurements.temp"}}},
							{Key: "tmax", Value: bson.D{{Key: "$max", Value: "$measurements.temp"}}},
							{Key: "hsum", Value: acc("hum")},
							{Key: "hmin", Value: bson.D{{Key: "$min", Value: "$measurements.hum"}}},
							{Key: "hmax", Value: bson.D{{Key: "$max", Value: "$measurements.hum"}}},
						}}},
						{{Key: "$project", Value: bson.D{
							{Key: "count", Value: 1},
							{Key: "temp", Value: bson.D{{Key: "min", Value: "$tmin"}, {Key: "max", Value: "$tmax"}, {Key: "sum", Value: "$tsum"}}},
							{Key: "hum", Value: bson.D{{Key: "min", Value: "$hmin"}, {Key: "max", Value: "$hmax"}, {Key: "sum", Value: "$hsum"}}},
						}}},
						{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
					}
				}
				op := func() []row {
					cur, err := coll.Aggregate(ctx, pipeline())
					if err != nil {
						b.Fatal(err)
					}
					var rows []row
					err = cur.All(ctx, &rows)
					check(rows, err)
					return rows
				}
				require.Equal(b, libRows, op(), "the same answer")
				return func(int) { op() }
			}
			type doc struct {
				ID     bson.ObjectID `bson:"_id"`
				Meta   string        `bson:"meta"`
				Count  int32         `bson:"count"`
				Points []reading     `bson:"measurements"`
			}
			op := func() []row {
				cur, err := coll.Find(ctx, filter(), options.Find().SetSort(bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: 1}}))
				if err != nil {
					b.Fatal(err)
				}
				var rows []row
				seen := map[bson.ObjectID]doc{} // the buckets of the series of the last row, one copy each
				sum := func() {
					r := &rows[len(rows)-1]
					for _, d := range seen {
						for _, p := range d.Points {
							if p.At.Before(from) || !p.At.Before(to) {
								continue
							}
							r.Count++
							r.Temp = stats{min(r.Temp.Min, p.Temp), max(r.Temp.Max, p.Temp), r.Temp.Sum + p.Temp}
							h := float64(p.Hum)
							r.Hum = stats{min(r.Hum.Min, h), max(r.Hum.Max, h), r.Hum.Sum + h}
						}
					}
					clear(seen)
				}
				for cur.Next(ctx) {
					var d doc
					if err := cur.Decode(&d); err != nil {
						b.Fatal(err)
					}
					if len(rows) == 0 || rows[len(rows)-1].Meta != d.Meta {
						if len(rows) > 0 {
							sum()
						}
						inf := stats{Min: math.Inf(1), Max: math.Inf(-1)}
						rows = append(rows, row{Meta: d.Meta, Temp: inf, Hum: inf})
					}
					if old, ok := seen[d.ID]; !ok || d.Count > old.Count {
						seen[d.ID] = d
					}
				}
				if len(rows) > 0 {
					sum()
				}
				check(rows, cur.Err())
				return rows
			}
			require.Equal(b, libRows, op(), "the same answer")
			return func(int) { op() }
		},
		Speed:  0.9,
		Allocs: 1.1,
	})
}

// scaleBuckets is the data of the scaling benchmarks at size n: n
// buckets, of n/10 series ("m0000000" ...) holding ten hours each, six
// readings an hour, written ready-made in large batches.
func scaleBuckets(b *testing.B, sizes []int, bound mongotest.Bound, writes bool, op func(s *bucket.Buckets[string, reading], n int) func(i int)) {
	s, db := newBenchStore(b)
	coll := db.Collection("readings")
	mongotest.Scaling(b, mongotest.Growth{
		Sizes: sizes,
		Grow: func(b *testing.B, from, to int) {
			var docs []any
			flush := func() {
				if len(docs) > 0 {
					_, err := coll.InsertMany(context.Background(), docs)
					require.NoError(b, err)
					docs = docs[:0]
				}
			}
			for series := from / 10; series < to/10; series++ {
				var pts []bucket.Point[string, reading]
				for m := 0; m < 600; m += 10 {
					pts = append(pts, bucket.Point[string, reading]{Meta: scaleSeries(series), Value: readingAt(at(time.Duration(m)*time.Minute), m)})
				}
				if docs = append(docs, readyBuckets(pts)...); len(docs) >= 1000 {
					flush()
				}
			}
			flush()
		},
		Op:     func(_ *testing.B, n int) func(int) { return op(s, n) },
		Bound:  bound,
		Writes: writes,
	})
}

func scaleSeries(i int) string { return fmt.Sprintf("m%07d", i) }

// BenchmarkScaleAdd measures how Add of one reading grows with the number
// of buckets: flat (the upsert finds the series' open bucket by the
// index). The readings go after the data, a minute apart: most append to
// the open bucket, one in 60 (Cap) starts a new one.
func BenchmarkScaleAdd(b *testing.B) {
	scaleBuckets(b, nil, mongotest.Flat, true, func(s *bucket.Buckets[string, reading], n int) func(int) {
		return func(i int) {
			t := at(time.Duration(n)*time.Hour + time.Duration(i)*time.Minute)
			require.NoError(b, s.Add(context.Background(), scaleSeries(0), readingAt(t, i)))
		}
	})
}

// BenchmarkScaleAddMany measures how AddMany of ten readings, one to each
// of ten series, grows with the number of buckets: flat. A minute apart,
// after the data, as BenchmarkScaleAdd.
func BenchmarkScaleAddMany(b *testing.B) {
	scaleBuckets(b, nil, mongotest.Flat, true, func(s *bucket.Buckets[string, reading], n int) func(int) {
		return func(i int) {
			t := at(time.Duration(n)*time.Hour + time.Duration(i)*time.Minute)
			pts := make([]bucket.Point[string, reading], 10)
			for k := range pts {
				pts[k] = bucket.Point[string, reading]{Meta: scaleSeries(k), Value: readingAt(t, i)}
			}
			require.NoError(b, s.AddMany(context.Background(), pts))
		}
	})
}

// BenchmarkScaleLatest measures how Latest of a series grows with the
// number of buckets: flat (the series' newest buckets by the index).
func BenchmarkScaleLatest(b *testing.B) {
	scaleBuckets(b, nil, mongotest.Flat, false, func(s *bucket.Buckets[string, reading], _ int) func(int) {
		return func(i int) {
			if _, err := s.Latest(context.Background(), scaleSeries(i%10)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScaleSummaries measures how the hourly Summaries of a series
// over its ten hours grow with the number of buckets: flat (the series'
// buckets by the index).
func BenchmarkScaleSummaries(b *testing.B) {
	scaleBuckets(b, nil, mongotest.Flat, false, func(s *bucket.Buckets[string, reading], _ int) func(int) {
		return func(i int) {
			k := 0
			for _, err := range s.Summaries(context.Background(), scaleSeries(i%10), at(0), at(10*time.Hour), time.Hour) {
				require.NoError(b, err)
				k++
			}
			require.Equal(b, 10, k)
		}
	})
}

// BenchmarkScaleSummariesBySeries measures how SummariesBySeries over the
// ten hours grows with the number of buckets: linear, as it reads them
// all. From 10^3 buckets, where their reading outweighs the call's fixed
// cost (mongotest.Linear). On FerretDB 2.7 it measured 1.47 [1.26, 1.53]
// (2026-12-02, 20 runs a size, loaded machine: 10.6 ms at 10^3, 125 ms at
// 3,000, 317 ms at 10^4): MISSED (it grows faster than in proportion), open
// (issue 36); one other run measured 1.11 [0.98, 1.25].
func BenchmarkScaleSummariesBySeries(b *testing.B) {
	scaleBuckets(b, []int{1000, 3000, 10000}, mongotest.Linear, false, func(s *bucket.Buckets[string, reading], n int) func(int) {
		return func(int) {
			k := 0
			for _, err := range s.SummariesBySeries(context.Background(), at(0), at(10*time.Hour)) {
				require.NoError(b, err)
				k++
			}
			require.Equal(b, n/10, k)
		}
	})
}
