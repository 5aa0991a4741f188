package bucket_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

type summary = struct{ Min, Max, Sum float64 }

func TestAddIsOneUpsertKeepingTheSummary(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(100))
		c := mongotest.NewCounter(t, db)
		rs := []reading{
			{At: at(10 * time.Minute), Temp: 20.5, Hum: 40},
			{At: at(5 * time.Minute), Temp: 19, Hum: 45},
			{At: at(50 * time.Minute), Temp: 21.25, Hum: 38},
			{At: at(70 * time.Minute), Temp: 22, Hum: 30},
		}
		for _, r := range rs {
			require.Equal(t, []string{"update"}, c.Count(func() { require.NoError(t, s.Add(ctx, "s1", r)) }))
		}
		bks := storedBuckets(t, db)
		slices.SortFunc(bks, func(a, b storedBucket) int { return a.Start.Compare(b.Start) })
		for i := range bks {
			bks[i].ID = bson.ObjectID{}
			bks[i].Start, bks[i].First, bks[i].Last = bks[i].Start.UTC(), bks[i].First.UTC(), bks[i].Last.UTC()
			utc(bks[i].Points)
		}
		require.Equal(t, []storedBucket{
			{
				Meta: "s1", Start: at(0), First: at(5 * time.Minute), Last: at(50 * time.Minute), Count: 3, Points: rs[:3],
				Summary: map[string]struct{ Min, Max, Sum float64 }{"temp": {19, 21.25, 60.75}, "hum": {38, 45, 123}},
			},
			{
				Meta: "s1", Start: at(time.Hour), First: at(70 * time.Minute), Last: at(70 * time.Minute), Count: 1, Points: rs[3:],
				Summary: map[string]struct{ Min, Max, Sum float64 }{"temp": {22, 22, 22}, "hum": {30, 30, 30}},
			},
		}, bks)
	})
}

func TestCapSplitsAWindowIntoBuckets(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(3))
		var rs []reading
		for i := range 7 {
			rs = append(rs, readingAt(at(time.Duration(i)*time.Minute), i))
			require.NoError(t, s.Add(ctx, "s1", rs[i]))
		}
		bks := storedBuckets(t, db)
		checkBuckets(t, bks, 3, time.Hour)
		var counts []int
		for _, b := range bks {
			counts = append(counts, b.Count)
		}
		slices.Sort(counts)
		require.Equal(t, []int{1, 3, 3}, counts, "ceil(7/3) buckets, none above the cap")
		require.Equal(t, rs, utc(collect(t, s.Range(ctx, "s1", at(0), at(time.Hour)))))
	})
}

func TestAddManyCommands(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(20))
		c := mongotest.NewCounter(t, db)
		points := func(from, n int) []bucket.Point[string, reading] {
			var ps []bucket.Point[string, reading]
			for i := from; i < from+n; i++ {
				ps = append(ps, bucket.Point[string, reading]{Meta: []string{"s1", "s2"}[i%2], Value: readingAt(at(time.Duration(i)*time.Minute), i)})
			}
			return ps
		}
		// A find of the buckets with room, one update command for the
		// top-ups and one insert command for the new buckets. FerretDB
		// reports an error in an update command at index 0 whichever
		// statement failed, and skips the rest: there AddMany sends one
		// update statement per command.
		updates := func(n int) []string {
			if p == portable || !mongotest.Server().Has(patterns.FeatureBatchedUpdates) {
				return slices.Repeat([]string{"update"}, n)
			}
			return []string{"update"}
		}
		require.Equal(t, []string{"find", "insert"}, c.Count(func() { require.NoError(t, s.AddMany(ctx, points(0, 30))) }),
			"two new buckets of 15")
		require.Equal(t, slices.Concat([]string{"find"}, updates(2), []string{"insert"}), c.Count(func() { require.NoError(t, s.AddMany(ctx, points(30, 120))) }),
			"per series: a top-up of 5, new buckets of 10, 20, 10 and 15")
		require.Empty(t, c.Count(func() { require.NoError(t, s.AddMany(ctx, nil)) }), "nothing to write, nothing sent")
		checkBuckets(t, storedBuckets(t, db), 20, time.Hour)
		require.Len(t, collect(t, s.Range(ctx, "s1", at(0), at(24*time.Hour))), 75)
		require.Len(t, collect(t, s.Range(ctx, "s2", at(0), at(24*time.Hour))), 75)
	})
}

func TestMetaMustBeAnEquality(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		s, err := bucket.New[any, reading](db, config(10))
		require.NoError(t, err)
		r := readingAt(at(time.Minute), 1)
		require.NoError(t, s.Add(ctx, "s1", r))
		require.NoError(t, s.Add(ctx, "s2", r))

		bad := []struct {
			name string
			meta any
		}{
			{"operator document", bson.M{"$ne": nil}},
			{"operator bson.D", bson.D{{Key: "$gt", Value: ""}}},
			{"operator JSON-decoded map", map[string]any{"$exists": true}},
			{"nested operator", bson.M{"site": bson.M{"$ne": "x"}}},
			{"nil", nil},
			{"null", bson.Null{}},
			{"array", []string{"s1"}},
			{"regex", bson.Regex{Pattern: ".*"}},
			{"JavaScript", bson.JavaScript("true")},
			{"MinKey", bson.MinKey{}},
			{"NaN", math.NaN()},
			{"unencodable", make(chan int)},
		}
		// Every generated value of the classes metaValue's godoc refuses,
		// and both NaNs, encoded.
		for _, v := range bsonkinds.All() {
			switch {
			case v.Missing:
			case bsonid.IsNaN(v.V), v.Class == bsonkinds.MinKey, v.Class == bsonkinds.Undefined, v.Class == bsonkinds.Null,
				v.Class == bsonkinds.Array, v.Class == bsonkinds.Regex, v.Class == bsonkinds.DBPointer,
				v.Class == bsonkinds.JavaScript, v.Class == bsonkinds.JavaScriptWithScope, v.Class == bsonkinds.MaxKey:
				bad = append(bad, struct {
					name string
					meta any
				}{v.Name, v.V})
			}
		}
		for _, tc := range bad {
			t.Run(tc.name, func(t *testing.T) {
				require.ErrorIs(t, s.Add(ctx, tc.meta, r), patterns.ErrInvalid)
				require.ErrorIs(t, s.AddMany(ctx, []bucket.Point[any, reading]{{Meta: tc.meta, Value: r}}), patterns.ErrInvalid)
				require.ErrorIs(t, firstErr(s.Range(ctx, tc.meta, at(0), at(time.Hour))), patterns.ErrInvalid)
				require.ErrorIs(t, firstErr(s.Summaries(ctx, tc.meta, at(0), at(time.Hour), time.Hour)), patterns.ErrInvalid)
				require.ErrorIs(t, s.DeleteSeriesBefore(ctx, tc.meta, at(time.Hour)), patterns.ErrInvalid)
			})
		}
		n, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.EqualValues(t, 2, n, "both series are intact")
		for _, sensor := range []string{"s1", "s2"} {
			require.Len(t, collect(t, s.Range(ctx, sensor, at(0), at(time.Hour))), 1)
		}
	})
}

func TestMetaDocumentsAreCanonical(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		type site struct {
			Site   string `bson:"site"`
			Sensor int    `bson:"sensor"`
		}
		ctx := context.Background()
		db := mongotest.DB(t)
		s, err := bucket.New[any, reading](db, config(10))
		require.NoError(t, err)
		metas := []any{
			site{Site: "lyon", Sensor: 7},
			bson.M{"sensor": 7, "site": "lyon"},
			bson.D{{Key: "sensor", Value: 7}, {Key: "site", Value: "lyon"}},
			map[string]any{"site": "lyon", "sensor": 7},
		}
		for i, m := range metas {
			require.NoError(t, s.Add(ctx, m, readingAt(at(time.Duration(i)*time.Minute), i)))
		}
		n, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "a struct, a map and a bson.D with the same fields name one series")
		for _, m := range metas {
			require.Len(t, collect(t, s.Range(ctx, m, at(0), at(time.Hour))), len(metas))
		}
		var stored struct {
			Meta bson.Raw `bson:"meta"`
		}
		require.NoError(t, db.Collection("readings").FindOne(ctx, bson.D{}).Decode(&stored))
		keys, err := stored.Meta.Elements()
		require.NoError(t, err)
		require.Equal(t, "sensor", keys[0].Key(), "keys are stored sorted")
	})
}

func TestDuplicateKeyIsRetriedThenAConflict(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		s, err := bucket.New[string, reading](db, config(2))
		require.NoError(t, err)
		// The unique index the issue warns against: once a bucket is full,
		// the upsert for a new one collides with it.
		_, err = db.Collection("readings").Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: "meta", Value: 1}, {Key: "start", Value: 1}}, Options: options.Index().SetUnique(true),
		})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		require.NoError(t, s.Add(ctx, "s1", readingAt(at(time.Minute), 1)))
		require.NoError(t, s.Add(ctx, "s1", readingAt(at(2*time.Minute), 2)))

		var addErr error
		require.Equal(t, []string{"update", "update", "update"}, c.Count(func() {
			addErr = s.Add(ctx, "s1", readingAt(at(3*time.Minute), 3))
		}), "three attempts")
		require.ErrorIs(t, addErr, patterns.ErrConflict)

		var manyErr error
		sent := c.Count(func() {
			manyErr = s.AddMany(ctx, []bucket.Point[string, reading]{
				{Meta: "s1", Value: readingAt(at(4*time.Minute), 4)},
				{Meta: "s1", Value: readingAt(at(2*time.Hour), 5)},
			})
		})
		require.Equal(t, []string{"find", "insert", "find", "insert", "find", "insert"}, sent,
			"a read and both new buckets, then a read and the refused one, twice: three attempts")
		pe, ok := errors.AsType[*bucket.PartialError](manyErr)
		require.True(t, ok, "%v", manyErr)
		require.Equal(t, []int{0}, pe.Failed)
		require.ErrorIs(t, manyErr, patterns.ErrConflict)

		require.Len(t, collect(t, s.Range(ctx, "s1", at(0), at(time.Hour))), 2, "the full bucket is untouched")
		require.Len(t, collect(t, s.Range(ctx, "s1", at(time.Hour), at(3*time.Hour))), 1, "the other point of the batch is stored")
	})
}

func TestTooLarge(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		type blob struct {
			At   time.Time `bson:"at"`
			Data []byte    `bson:"data"`
		}
		ctx := context.Background()
		db := mongotest.DB(t)
		cfg := bucket.Config{Collection: "readings", TimeField: "at", Window: time.Hour, Cap: 100}
		s, err := bucket.New[string, blob](db, cfg)
		require.NoError(t, err)
		require.NoError(t, s.Add(ctx, "s1", blob{At: at(0), Data: make([]byte, 100<<10)}), "100 of 100 KiB fit in 16 MiB")
		err = s.Add(ctx, "s1", blob{At: at(time.Minute), Data: make([]byte, 200<<10)})
		require.ErrorIs(t, err, patterns.ErrTooLarge, "100 of 200 KiB may not")
		require.Len(t, collect(t, s.Range(ctx, "s1", at(0), at(time.Hour))), 1)

		cfg.Cap = 1 << 20
		_, err = bucket.New[string, reading](db, cfg)
		require.ErrorIs(t, err, patterns.ErrInvalid, "a million readings of a zero reading pass 16 MiB")
	})
}

// TestSummariesReadBucketSummaries checks the client path of Summaries,
// which every server can take: one find of the buckets, whether the steps
// align with the windows (each bucket counts by its summary) or not (the
// buckets that straddle a step count by their measurements).
func TestSummariesReadBucketSummaries(t *testing.T) {
	ctx := context.Background()
	s, db := newBuckets(t, portable, config(5))
	rs := series(t, s, "s1", at(0), 7*time.Minute, 40)
	c := mongotest.NewCounter(t, db)

	var got []bucket.Summary
	require.Equal(t, []string{"find"}, c.Count(func() { got = collect(t, s.Summaries(ctx, "s1", at(0), at(5*time.Hour), time.Hour)) }),
		"steps aligned with windows")
	require.Equal(t, summarise(rs, at(0), at(5*time.Hour), time.Hour), got)

	require.Equal(t, []string{"find"}, c.Count(func() {
		got = collect(t, s.Summaries(ctx, "s1", at(30*time.Minute), at(5*time.Hour), time.Hour))
	}), "steps across windows")
	require.Equal(t, summarise(rs, at(30*time.Minute), at(5*time.Hour), time.Hour), got)
}

// TestSummariesOnTheServer checks the server path of Summaries.
func TestSummariesOnTheServer(t *testing.T) {
	mongotest.Require(t, patterns.FeatureGroupMinMaxAvg)
	ctx := context.Background()
	s, db := newBuckets(t, bucket.PlanFor(mongotest.Server()), config(5))
	rs := series(t, s, "s1", at(0), 7*time.Minute, 40)
	c := mongotest.NewCounter(t, db)
	var got []bucket.Summary
	require.Equal(t, []string{"aggregate"}, c.Count(func() {
		got = collect(t, s.Summaries(ctx, "s1", at(30*time.Minute), at(5*time.Hour), time.Hour))
	}))
	require.Equal(t, summarise(rs, at(30*time.Minute), at(5*time.Hour), time.Hour), got)
}

func TestSummariesRefuseMissingValues(t *testing.T) {
	ctx := context.Background()
	old := config(5)
	old.ValueFields = []string{"temp"}
	s, db := newBuckets(t, portable, old)
	series(t, s, "s1", at(0), 7*time.Minute, 20)

	// ValueFields grows after the buckets were written: their summaries
	// lack hum. A mean over the measurements that have it would be wrong,
	// on every path.
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		grown, err := bucket.New[string, reading](db, config(5))
		require.NoError(t, err)
		bucket.ForcePlan(grown, p)
		for _, from := range []time.Time{at(0), at(30 * time.Minute)} {
			err := firstErr(grown.Summaries(ctx, "s1", from, at(5*time.Hour), time.Hour))
			require.ErrorContains(t, err, `no value "hum"`)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			err = firstErr(grown.SummariesBySeries(ctx, from, at(5*time.Hour)))
			require.ErrorContains(t, err, `no value "hum"`)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, "bucket: SummariesBySeries: ")
		}
	})
}

// TestSummariesRefuseNullValues: a measurement whose value field is null
// (stored before the field was a value field, here by hand), in a bucket
// that straddles from, is refused on every path: $sum, $min and $max skip
// a null, so counting it would give a wrong mean.
func TestSummariesRefuseNullValues(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(5))
		_, err := db.Collection("readings").InsertOne(ctx, bson.D{
			{Key: "meta", Value: "s1"}, {Key: "start", Value: at(0)}, {Key: "first", Value: at(0)}, {Key: "last", Value: at(25 * time.Minute)},
			{Key: "count", Value: int32(3)},
			{Key: "measurements", Value: bson.A{
				bson.D{{Key: "at", Value: at(0)}, {Key: "temp", Value: 1.0}, {Key: "hum", Value: int64(1)}},
				bson.D{{Key: "at", Value: at(20 * time.Minute)}, {Key: "temp", Value: 2.0}, {Key: "hum", Value: int64(2)}},
				bson.D{{Key: "at", Value: at(25 * time.Minute)}, {Key: "temp", Value: 3.0}, {Key: "hum", Value: nil}},
			}},
			{Key: "summary", Value: bson.D{
				{Key: "temp", Value: bson.D{{Key: "min", Value: 1.0}, {Key: "max", Value: 3.0}, {Key: "sum", Value: 6.0}}},
			}},
		})
		require.NoError(t, err)
		err = firstErr(s.SummariesBySeries(ctx, at(10*time.Minute), at(time.Hour)))
		require.ErrorContains(t, err, `no value "hum"`)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		err = firstErr(s.Summaries(ctx, "s1", at(10*time.Minute), at(time.Hour), time.Hour))
		require.ErrorContains(t, err, `no value "hum"`)
		require.ErrorIs(t, err, patterns.ErrInvalid)
	})
}

// TestRangeMergesPartialBuckets reads a window split into partial buckets
// whose measurements interleave in time, as concurrent writers leave them
// on MongoDB, written by hand.
func TestRangeMergesPartialBuckets(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(10))
		var rs []reading
		bucketDoc := func(idx ...int) bson.D {
			var pts bson.A
			tm, hm := summary{math.Inf(1), math.Inf(-1), 0}, summary{math.Inf(1), math.Inf(-1), 0}
			first, last := time.Time{}, time.Time{}
			for _, i := range idx {
				r := readingAt(at(time.Duration(i)*time.Minute), i)
				rs = append(rs, r)
				pts = append(pts, r)
				tm = summary{min(tm.Min, r.Temp), max(tm.Max, r.Temp), tm.Sum + r.Temp}
				hm = summary{min(hm.Min, float64(r.Hum)), max(hm.Max, float64(r.Hum)), hm.Sum + float64(r.Hum)}
				if first.IsZero() || r.At.Before(first) {
					first = r.At
				}
				last = maxTime(last, r.At)
			}
			return bson.D{
				{Key: "meta", Value: "s1"}, {Key: "start", Value: first.Truncate(time.Hour)}, {Key: "first", Value: first}, {Key: "last", Value: last},
				{Key: "count", Value: int32(len(idx))}, {Key: "measurements", Value: pts},
				{Key: "summary", Value: bson.D{
					{Key: "temp", Value: bson.D{{Key: "min", Value: tm.Min}, {Key: "max", Value: tm.Max}, {Key: "sum", Value: tm.Sum}}},
					{Key: "hum", Value: bson.D{{Key: "min", Value: hm.Min}, {Key: "max", Value: hm.Max}, {Key: "sum", Value: hm.Sum}}},
				}},
			}
		}
		_, err := db.Collection("readings").InsertMany(ctx, []any{
			bucketDoc(61, 70, 65),        // the next window, inserted first
			bucketDoc(1, 4, 9, 30, 2),    // two partial buckets of the first window
			bucketDoc(3, 5, 8, 50, 7, 6), // interleaved with the first
		})
		require.NoError(t, err)
		checkBuckets(t, storedBuckets(t, db), 10, time.Hour)

		c := mongotest.NewCounter(t, db)
		var got []reading
		require.Equal(t, []string{"find"}, c.Count(func() { got = utc(collect(t, s.Range(ctx, "s1", at(2*time.Minute), at(66*time.Minute)))) }))
		require.Equal(t, inRange(rs, at(2*time.Minute), at(66*time.Minute)), got)

		require.Equal(t, summarise(rs, at(0), at(2*time.Hour), 20*time.Minute), collect(t, s.Summaries(ctx, "s1", at(0), at(2*time.Hour), 20*time.Minute)))
		require.Equal(t, summarise(rs, at(0), at(2*time.Hour), time.Hour), collect(t, s.Summaries(ctx, "s1", at(0), at(2*time.Hour), time.Hour)))
	})
}

func TestDeleteBeforeKeepsWholeBuckets(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(4))
		// 3 hours, in time order: per window, a bucket of 4 readings
		// (:00 to :30) and one of 2 (:40, :50).
		var s1, s2 []reading
		for i := range 18 {
			r := readingAt(at(time.Duration(i)*10*time.Minute), i)
			require.NoError(t, s.Add(ctx, "s1", r))
			require.NoError(t, s.Add(ctx, "s2", r))
			s1, s2 = append(s1, r), append(s2, r)
		}
		c := mongotest.NewCounter(t, db)

		cut := at(time.Hour + 35*time.Minute)
		require.Equal(t, []string{"delete"}, c.Count(func() { require.NoError(t, s.DeleteSeriesBefore(ctx, "s1", cut)) }))
		var kept []reading
		for _, b := range storedBuckets(t, db) {
			if b.Meta == "s1" {
				require.False(t, b.Last.Before(cut), "a bucket wholly before the cut is gone")
				kept = append(kept, b.Points...)
			}
		}
		require.Len(t, kept, 18-6-4, "the first window and the first bucket of the second are gone, the straddling one is kept")
		require.Equal(t, inRange(s1, cut, at(24*time.Hour)), utc(collect(t, s.Range(ctx, "s1", cut, at(24*time.Hour)))), "everything from the cut on is kept")
		require.Equal(t, s2, utc(collect(t, s.Range(ctx, "s2", at(0), at(24*time.Hour)))), "the other series is untouched")

		require.NoError(t, s.DeleteBefore(ctx, at(2*time.Hour)))
		for _, b := range storedBuckets(t, db) {
			require.False(t, b.Last.Before(at(2*time.Hour)))
		}
		require.Equal(t, inRange(s2, at(2*time.Hour), at(24*time.Hour)), utc(collect(t, s.Range(ctx, "s2", at(0), at(24*time.Hour)))))
		require.NoError(t, s.DeleteBefore(ctx, at(2*time.Hour)), "running it again is harmless")
	})
}

// TestServerErrorsAreClassified: an error of the server is classified at
// the package's boundary, so that a feature the server does not implement
// is patterns.ErrUnsupported on every server. Forcing the native path on a
// server without $group $min/$max makes Summaries send what it refuses.
func TestServerErrorsAreClassified(t *testing.T) {
	if mongotest.Server().Has(patterns.FeatureGroupMinMaxAvg) {
		t.Skipf("skipped: %s has %s; the test needs a server that refuses it", mongotest.Server(), patterns.FeatureGroupMinMaxAvg)
	}
	ctx := context.Background()
	s, _ := newBuckets(t, bucket.PlanFor(mongotest.Native()), config(5))
	series(t, s, "s1", at(0), 7*time.Minute, 10)
	err := firstErr(s.Summaries(ctx, "s1", at(0), at(2*time.Hour), time.Hour))
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	require.ErrorContains(t, err, "bucket: Summaries: ")
}

// TestDeleteBeforeUsesAnIndex: on MongoDB, the plans of the deletes of
// DeleteBefore and DeleteSeriesBefore (their filters, as pinned in
// TestExpiredFilterPinned) scan an index, not the collection, on a server
// that explains its plans as MongoDB does.
func TestDeleteBeforeUsesAnIndex(t *testing.T) {
	mongotest.RequireExplainPlans(t)
	ctx := context.Background()
	s, db := newBuckets(t, bucket.PlanFor(mongotest.Server()), config(4))
	series(t, s, "s1", at(0), 10*time.Minute, 30)
	series(t, s, "s2", at(0), 10*time.Minute, 30)
	cut := at(3 * time.Hour)
	before := bson.D{{Key: "$lt", Value: cut}}
	for name, filter := range map[string]bson.D{
		"DeleteBefore":       {{Key: "start", Value: before}, {Key: "last", Value: before}},
		"DeleteSeriesBefore": {{Key: "meta", Value: "s1"}, {Key: "start", Value: before}, {Key: "last", Value: before}},
	} {
		var explained bson.Raw
		require.NoError(t, db.RunCommand(ctx, bson.D{
			{Key: "explain", Value: bson.D{{Key: "delete", Value: "readings"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: filter}, {Key: "limit", Value: 0}}}}}},
			{Key: "verbosity", Value: "queryPlanner"},
		}).Decode(&explained))
		stages := planStages(explained.Lookup("queryPlanner", "winningPlan"))
		require.Contains(t, stages, "IXSCAN", "%s: %v", name, stages)
		require.NotContains(t, stages, "COLLSCAN", "%s: %v", name, stages)
	}
}

// planStages lists the stages of an explained plan, at every depth.
func planStages(v bson.RawValue) []string {
	var out []string
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		elems, _ := v.Document().Elements()
		for _, e := range elems {
			if e.Key() == "stage" {
				out = append(out, e.Value().StringValue())
				continue
			}
			out = append(out, planStages(e.Value())...)
		}
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, x := range vals {
			out = append(out, planStages(x)...)
		}
	}
	return out
}

func TestTTL(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		testTTL(t, p)
	})
}

func testTTL(t *testing.T, p bucket.Plan) {
	ctx := context.Background()
	cfg := config(10)
	cfg.TTL = 30 * 24 * time.Hour
	db := mongotest.DB(t)
	s, err := bucket.New[string, reading](db, cfg)
	require.NoError(t, err)
	bucket.ForcePlan(s, p)
	if p == portable || !mongotest.Server().Has(patterns.FeatureTTLIndexes) {
		err := s.Add(ctx, "s1", readingAt(at(0), 0))
		require.ErrorIs(t, err, patterns.ErrUnsupported)
		ue, ok := errors.AsType[*patterns.UnsupportedError](err)
		require.True(t, ok)
		require.Equal(t, patterns.FeatureTTLIndexes, ue.Feature)
		require.ErrorIs(t, firstErr(s.Range(ctx, "s1", at(0), at(time.Hour))), patterns.ErrUnsupported)
		names, err := db.ListCollectionNames(ctx, bson.D{})
		require.NoError(t, err)
		require.Empty(t, names, "nothing was written")
		return
	}
	require.NoError(t, patterns.EnsureIndexes(ctx, s.Indexes()...))
	specs, err := db.Collection("readings").Indexes().ListSpecifications(ctx)
	require.NoError(t, err)
	var ttl *int32
	for _, sp := range specs {
		if sp.Name == "last_1" {
			ttl = sp.ExpireAfterSeconds
		}
	}
	require.NotNil(t, ttl)
	require.EqualValues(t, 30*24*3600, *ttl)
	require.NoError(t, s.Add(ctx, "s1", readingAt(at(0), 0)))
}
