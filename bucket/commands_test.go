package bucket

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The update documents and pipelines of the native paths, pinned here so
// that they are checked even where the server cannot run them.

type pinnedReading struct {
	At   time.Time `bson:"at"`
	Temp float64   `bson:"temp"`
	Hum  int64     `bson:"hum"`
}

func pinnedSettings(t *testing.T, cfg Config) *settings {
	t.Helper()
	s, err := newSettings(mongotest.Client().Database("pinned"), cfg)
	require.NoError(t, err)
	return s
}

func date(s string) bson.DateTime {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return bson.NewDateTimeFromTime(t)
}

var pinnedConfig = Config{Collection: "readings", TimeField: "at", ValueFields: []string{"temp", "hum"}, MetaField: "sensor", Window: time.Hour, Cap: 200}

func TestAddUpsertPinned(t *testing.T) {
	b, err := New[string, pinnedReading](mongotest.Client().Database("pinned"), pinnedConfig)
	require.NoError(t, err)
	s := b.s
	at := time.Date(2026, 3, 1, 10, 42, 7, 0, time.UTC)
	p, err := s.parse(pinnedReading{At: at, Temp: 21.5, Hum: 40})
	require.NoError(t, err)
	m, err := metaValue("s-1")
	require.NoError(t, err)
	filter, update, err := b.upsert("s-1", pinnedReading{At: at, Temp: 21.5, Hum: 40})
	require.NoError(t, err)
	require.Equal(t, bson.D{
		{Key: "sensor", Value: m},
		{Key: "start", Value: date("2026-03-01T10:00:00Z")},
		{Key: "count", Value: bson.D{{Key: "$lt", Value: int32(200)}}},
	}, filter)
	require.Equal(t, bson.D{
		{Key: "$push", Value: bson.D{{Key: "measurements", Value: p.raw}}},
		{Key: "$inc", Value: bson.D{{Key: "count", Value: int32(1)}, {Key: "summary.temp.sum", Value: 21.5}, {Key: "summary.hum.sum", Value: 40.0}}},
		{Key: "$min", Value: bson.D{{Key: "first", Value: date("2026-03-01T10:42:07Z")}, {Key: "summary.temp.min", Value: 21.5}, {Key: "summary.hum.min", Value: 40.0}}},
		{Key: "$max", Value: bson.D{{Key: "last", Value: date("2026-03-01T10:42:07Z")}, {Key: "summary.temp.max", Value: 21.5}, {Key: "summary.hum.max", Value: 40.0}}},
	}, update)
}

func TestWindowStart(t *testing.T) {
	hour := time.Hour.Milliseconds()
	tests := []struct {
		at, want bson.DateTime
		window   int64
	}{
		{date("2026-03-01T10:42:07Z"), date("2026-03-01T10:00:00Z"), hour},
		{date("2026-03-01T10:00:00Z"), date("2026-03-01T10:00:00Z"), hour},
		{date("2026-03-01T10:42:07Z"), date("2026-03-01T00:00:00Z"), 24 * hour},
		{date("2026-03-01T10:42:07Z"), date("2026-03-01T10:40:00Z"), 5 * 60 * 1000},
		{date("1969-12-31T23:30:00Z"), date("1969-12-31T23:00:00Z"), hour}, // before the epoch: floor, not truncation
		{date("0001-01-01T00:00:01Z"), date("0001-01-01T00:00:00Z"), hour},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, windowStart(tc.at, tc.window), "%v", tc.at.Time())
	}
}

func TestReadOptionsPinned(t *testing.T) {
	require.Equal(t, bson.D{{Key: "start", Value: 1}}, byStart())
	require.Equal(t, bson.D{{Key: "start", Value: 1}, {Key: "measurements", Value: 1}}, rangeProjection())
	require.Equal(t, bson.D{{Key: "writes", Value: 0}}, withoutWrites())
}

// TestLatestPinned: Latest reads the buckets of the series, newest window
// first, by the index {<meta>, start, count}, and then every bucket of
// the newest window; TimeSeries reads the newest measurement by the index
// {<meta>, <time>}. The same commands on every plan.
func TestLatestPinned(t *testing.T) {
	s := pinnedSettings(t, pinnedConfig)
	m, err := metaValue("s-1")
	require.NoError(t, err)
	require.Equal(t, bson.D{{Key: "sensor", Value: m}}, s.seriesFilter(m))
	require.Equal(t, bson.D{{Key: "sensor", Value: m}, {Key: "start", Value: date("2026-03-01T10:00:00Z")}}, s.windowFilter(m, date("2026-03-01T10:00:00Z")))
	require.Equal(t, bson.D{{Key: "start", Value: -1}}, newestFirst())
	require.Equal(t, bson.D{{Key: "at", Value: -1}}, s.newestByTime())
	require.Equal(t, 2, latestHeads)
}

func TestOverlapFilterPinned(t *testing.T) {
	s := pinnedSettings(t, pinnedConfig)
	m, err := metaValue("s-1")
	require.NoError(t, err)
	from, to := date("2026-03-01T10:30:00Z"), date("2026-03-01T12:00:00Z")
	require.Equal(t, bson.D{
		{Key: "sensor", Value: m},
		{Key: "start", Value: bson.D{{Key: "$gt", Value: date("2026-03-01T09:30:00Z")}, {Key: "$lt", Value: to}}},
		{Key: "first", Value: bson.D{{Key: "$lt", Value: to}}},
		{Key: "last", Value: bson.D{{Key: "$gte", Value: from}}},
	}, s.overlapFilter(read{meta: m, from: from, to: to}))
}

func TestGrid(t *testing.T) {
	from, to := time.Date(2026, 3, 1, 0, 30, 0, 0, time.UTC), time.Date(2026, 3, 1, 5, 0, 0, 0, time.UTC)
	g := newGrid(read{from: bson.NewDateTimeFromTime(from), to: bson.NewDateTimeFromTime(to)}, 2*time.Hour)
	require.Equal(t, date("2026-03-01T00:30:00Z"), g.stepOf(date("2026-03-01T00:30:00Z")))
	require.Equal(t, date("2026-03-01T00:30:00Z"), g.stepOf(date("2026-03-01T02:29:59Z")))
	require.Equal(t, date("2026-03-01T02:30:00Z"), g.stepOf(date("2026-03-01T02:30:00Z")))
	require.Equal(t, date("2026-03-01T04:30:00Z"), g.stepOf(date("2026-03-01T04:59:59Z")))

	require.True(t, g.within(date("2026-03-01T01:00:00Z"), date("2026-03-01T01:59:00Z")))
	require.False(t, g.within(date("2026-03-01T00:00:00Z"), date("2026-03-01T00:59:00Z")), "starts before from")
	require.False(t, g.within(date("2026-03-01T02:00:00Z"), date("2026-03-01T02:59:00Z")), "crosses a step boundary")
	require.False(t, g.within(date("2026-03-01T04:40:00Z"), date("2026-03-01T05:00:00Z")), "reaches to")

	var tl tally
	tl.count, tl.stats = 4, []Stats{{Min: 1, Max: 4, Sum: 10}}
	require.Equal(t, Summary{
		Start: time.Date(2026, 3, 1, 4, 30, 0, 0, time.UTC), End: to, Count: 4,
		Values: map[string]Stats{"temp": {Min: 1, Max: 4, Sum: 10, Mean: 2.5}},
	}, g.summary(date("2026-03-01T04:30:00Z"), []string{"temp"}, &tl), "the last step ends at to")
}

func TestSummaryPipelinePinned(t *testing.T) {
	s := pinnedSettings(t, Config{Collection: "readings", TimeField: "at", ValueFields: []string{"temp"}, Window: time.Hour, Cap: 100})
	f, tt := date("2026-03-01T00:30:00Z"), date("2026-03-02T00:00:00Z")
	g := newGrid(read{from: f, to: tt}, 2*time.Hour)
	step := func(x any) bson.D {
		return bson.D{{Key: "$subtract", Value: bson.A{x, bson.D{{Key: "$mod", Value: bson.A{bson.D{{Key: "$subtract", Value: bson.A{x, f}}}, int64(7200000)}}}}}}
	}
	whole := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gte", Value: bson.A{"$first", f}}},
		bson.D{{Key: "$lt", Value: bson.A{"$last", tt}}},
		bson.D{{Key: "$eq", Value: bson.A{step("$first"), step("$last")}}},
	}}}
	either := func(a, b any) bson.D { return bson.D{{Key: "$cond", Value: bson.A{whole, a, b}}} }
	require.Equal(t, mongo.Pipeline{
		{{Key: "$project", Value: bson.D{
			{Key: "n", Value: "$count"}, {Key: "f", Value: "$first"}, {Key: "w", Value: whole},
			{Key: "c", Value: either("$count", 1)}, {Key: "s", Value: either("$summary", "$$REMOVE")}, {Key: "p", Value: either("$$REMOVE", "$measurements")},
		}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "b", Value: bson.D{{Key: "$max", Value: bson.D{
			{Key: "n", Value: "$n"}, {Key: "f", Value: "$f"}, {Key: "w", Value: "$w"}, {Key: "c", Value: "$c"}, {Key: "s", Value: "$s"}, {Key: "p", Value: "$p"},
		}}}}}}},
		{{Key: "$unwind", Value: bson.D{{Key: "path", Value: "$b.p"}, {Key: "preserveNullAndEmptyArrays", Value: true}}}},
		{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "b.p", Value: nil}},
			bson.D{{Key: "b.p.at", Value: bson.D{{Key: "$gte", Value: f}, {Key: "$lt", Value: tt}}}},
		}}}}},
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: bson.D{{Key: "k", Value: step(bson.D{{Key: "$ifNull", Value: bson.A{"$b.p.at", "$b.f"}}})}, {Key: "w", Value: "$b.w"}}},
			{Key: "count", Value: bson.D{{Key: "$sum", Value: "$b.c"}}},
			{Key: "psum0", Value: bson.D{{Key: "$sum", Value: "$b.p.temp"}}},
			{Key: "ssum0", Value: bson.D{{Key: "$sum", Value: "$b.s.temp.sum"}}},
			{Key: "pmin0", Value: bson.D{{Key: "$min", Value: "$b.p.temp"}}},
			{Key: "smin0", Value: bson.D{{Key: "$min", Value: "$b.s.temp.min"}}},
			{Key: "pmax0", Value: bson.D{{Key: "$max", Value: "$b.p.temp"}}},
			{Key: "smax0", Value: bson.D{{Key: "$max", Value: "$b.s.temp.max"}}},
			{Key: "n0", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{
				bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "$isNumber", Value: "$b.p.temp"}}, bson.D{{Key: "$isNumber", Value: "$b.s.temp.sum"}}}}}, "$b.c", 0,
			}}}}}},
		}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}, s.summaryPipeline(bson.D{{Key: "sensor", Value: "s-1"}}, g)[1:])
	require.Equal(t, bson.D{{Key: "$match", Value: bson.D{{Key: "sensor", Value: "s-1"}}}}, s.summaryPipeline(bson.D{{Key: "sensor", Value: "s-1"}}, g)[0])
}

func TestTimeSeriesPinned(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want bson.D
	}{
		{"granularity", Config{Collection: "ts", TimeField: "at", Granularity: Minutes, Window: time.Hour}, bson.D{
			{Key: "create", Value: "ts"},
			{Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "at"}, {Key: "metaField", Value: "meta"}, {Key: "granularity", Value: "minutes"}}},
		}},
		{"window as bucket span, with TTL", Config{Collection: "ts", TimeField: "at", MetaField: "sensor", Window: time.Hour, TTL: 30 * 24 * time.Hour}, bson.D{
			{Key: "create", Value: "ts"},
			{Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "at"}, {Key: "metaField", Value: "sensor"}, {Key: "bucketMaxSpanSeconds", Value: int32(3600)}, {Key: "bucketRoundingSeconds", Value: int32(3600)}}},
			{Key: "expireAfterSeconds", Value: int64(2592000)},
		}},
		{"server defaults", Config{Collection: "ts", TimeField: "at"}, bson.D{
			{Key: "create", Value: "ts"},
			{Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "at"}, {Key: "metaField", Value: "meta"}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, pinnedSettings(t, tc.cfg).createCommand())
		})
	}

	s := pinnedSettings(t, pinnedConfig)
	key, err := s.timeSeriesKey()
	require.NoError(t, err)
	require.Equal(t, bson.D{{Key: "sensor", Value: 1}, {Key: "at", Value: 1}}, key)
	require.Equal(t, bson.D{{Key: "at", Value: 1}}, s.byTime())
	require.Equal(t, bson.D{{Key: "name", Value: "readings"}}, byName("readings"))
	m, err := metaValue("s-1")
	require.NoError(t, err)
	from, to := date("2026-03-01T00:00:00Z"), date("2026-03-02T00:00:00Z")
	filter := s.intervalFilter(read{meta: m, from: from, to: to})
	require.Equal(t, bson.D{
		{Key: "sensor", Value: m},
		{Key: "at", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
	}, filter)
	g := grid{from: from, to: to, step: time.Hour.Milliseconds()}
	step := bson.D{{Key: "$subtract", Value: bson.A{"$at", bson.D{{Key: "$mod", Value: bson.A{bson.D{{Key: "$subtract", Value: bson.A{"$at", from}}}, int64(3600000)}}}}}}
	isNum := func(f string) bson.D {
		return bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isNumber", Value: f}}, 1, 0}}}}}
	}
	require.Equal(t, mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: bson.D{{Key: "k", Value: step}}},
			{Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "psum0", Value: bson.D{{Key: "$sum", Value: "$temp"}}},
			{Key: "pmin0", Value: bson.D{{Key: "$min", Value: "$temp"}}},
			{Key: "pmax0", Value: bson.D{{Key: "$max", Value: "$temp"}}},
			{Key: "n0", Value: isNum("$temp")},
			{Key: "psum1", Value: bson.D{{Key: "$sum", Value: "$hum"}}},
			{Key: "pmin1", Value: bson.D{{Key: "$min", Value: "$hum"}}},
			{Key: "pmax1", Value: bson.D{{Key: "$max", Value: "$hum"}}},
			{Key: "n1", Value: isNum("$hum")},
		}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}, s.timeSeriesPipeline(filter, g))
}

func TestBucketSize(t *testing.T) {
	s := pinnedSettings(t, Config{Collection: "c", TimeField: "at", ValueFields: []string{"v"}, Window: time.Hour, Cap: 2})
	// The largest bucket of two measurements, built for real: the
	// estimate is exact for fixed-size measurements.
	m, err := metaValue("sensor-1")
	require.NoError(t, err)
	p, err := s.parse(bson.D{{Key: "at", Value: date("2026-03-01T10:00:00Z")}, {Key: "v", Value: 1.5}})
	require.NoError(t, err)
	doc, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.NewObjectID()}, {Key: "meta", Value: m},
		{Key: "start", Value: p.at}, {Key: "first", Value: p.at}, {Key: "last", Value: p.at}, {Key: "count", Value: int32(2)},
		{Key: "measurements", Value: bson.A{p.raw, p.raw}},
		{Key: "summary", Value: bson.D{{Key: "v", Value: bson.D{{Key: "min", Value: 1.5}, {Key: "max", Value: 1.5}, {Key: "sum", Value: 3.0}}}}},
		{Key: "writes", Value: bson.A{bson.NewObjectID(), bson.NewObjectID()}}, // each measurement by a statement of its own
	})
	require.NoError(t, err)
	require.Equal(t, len(doc), s.bucketSize(len(m.Value), len(p.raw)))
}

// BenchmarkUpsert is the client-side cost of one Add before the driver
// sends it: the meta's canonical form, the measurement's encoding and
// checks, the size bound and the update document.
func BenchmarkUpsert(b *testing.B) {
	s, err := New[string, pinnedReading](mongotest.Client().Database("bench"), pinnedConfig)
	require.NoError(b, err)
	r := pinnedReading{At: time.Date(2026, 3, 1, 10, 42, 7, 0, time.UTC), Temp: 21.5, Hum: 40}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.upsert("s-1", r); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEveryFilterHasAnIndex: each filter the bucket store sends
// constrains the leading field of one of its indexes, so that MongoDB can
// use that index instead of scanning the collection (a compound index
// whose leading field the query does not name is not used).
func TestEveryFilterHasAnIndex(t *testing.T) {
	b, err := New[string, pinnedReading](mongotest.Client().Database("pinned"), pinnedConfig)
	require.NoError(t, err)
	m, err := metaValue("s-1")
	require.NoError(t, err)
	t0 := date("2026-03-01T10:00:00Z")
	filters := map[string]bson.D{
		"Add":                 b.s.addFilter(m, t0),
		"AddMany's read":      b.s.openFilter([]windows{{metas: bson.A{m}, starts: bson.A{t0}}}),
		"AddMany's top-up":    b.s.topUpFilter(bson.RawValue{Type: bson.TypeObjectID, Value: make([]byte, 12)}, m, t0, 3, bson.NewObjectID()),
		"AddMany's retry":     b.s.writtenFilter([]window{{meta: m, start: t0, writes: bson.A{bson.NewObjectID()}}}),
		"Range and Summaries": b.s.overlapFilter(read{meta: m, from: t0, to: t0 + 3600000}),
		"SummariesBySeries":   b.s.windowOverlap(read{from: t0, to: t0 + 3600000}),
		"Latest":              b.s.seriesFilter(m),
		"Latest's window":     b.s.windowFilter(m, t0),
		"DeleteBefore":        b.s.expiredFilter(nil, t0),
		"DeleteSeriesBefore":  b.s.expiredFilter(&m, t0),
	}
	for name, filter := range filters {
		served := slices.ContainsFunc(b.Indexes(), func(ix patterns.Index) bool {
			lead := ix.Model.Keys.(bson.D)[0].Key
			return slices.ContainsFunc(filter, func(e bson.E) bool { return e.Key == lead })
		})
		require.True(t, served, "%s: no index leads with a field of %v", name, filter)
	}
}

func TestExpiredFilterPinned(t *testing.T) {
	s := pinnedSettings(t, pinnedConfig)
	m, err := metaValue("s-1")
	require.NoError(t, err)
	t0 := date("2026-03-01T10:00:00Z")
	before := bson.D{{Key: "$lt", Value: t0}}
	require.Equal(t, bson.D{{Key: "start", Value: before}, {Key: "last", Value: before}}, s.expiredFilter(nil, t0))
	require.Equal(t, bson.D{{Key: "sensor", Value: m}, {Key: "start", Value: before}, {Key: "last", Value: before}}, s.expiredFilter(&m, t0))
	require.Equal(t, bson.D{{Key: "at", Value: before}}, s.beforeFilter(nil, t0))
	require.Equal(t, bson.D{{Key: "sensor", Value: m}, {Key: "at", Value: before}}, s.beforeFilter(&m, t0))
}

func TestAddManyCommandsPinned(t *testing.T) {
	s := pinnedSettings(t, pinnedConfig)
	m, err := metaValue("s-1")
	require.NoError(t, err)
	start := date("2026-03-01T10:00:00Z")
	id := bson.RawValue{Type: bson.TypeObjectID, Value: make([]byte, 12)}
	write := bson.NewObjectID()
	require.Equal(t, bson.D{
		{Key: "_id", Value: id},
		{Key: "sensor", Value: m},
		{Key: "start", Value: start},
		{Key: "count", Value: bson.D{{Key: "$lte", Value: int32(197)}}},
		{Key: "writes", Value: bson.D{{Key: "$ne", Value: write}}},
	}, s.topUpFilter(id, m, start, 3, write), "a top-up of 3 into a bucket of cap 200, by the statement write")

	var pts []point
	for i, v := range []float64{21.5, 19, 23.25} {
		p, err := s.parse(pinnedReading{At: time.Date(2026, 3, 1, 10, 10*i, 0, 0, time.UTC), Temp: v, Hum: int64(40 + i)})
		require.NoError(t, err)
		pts = append(pts, p)
	}
	w := &manyWrite{s: s, pts: pts}
	arr, sp := w.take([]int{2, 0, 1})
	want, err := bson.Marshal(bson.D{{Key: "0", Value: pts[2].raw}, {Key: "1", Value: pts[0].raw}, {Key: "2", Value: pts[1].raw}})
	require.NoError(t, err)
	require.Equal(t, bson.TypeArray, arr.Type)
	require.Equal(t, want, []byte(arr.Value), "the measurements as a BSON array, in the order given")
	require.Equal(t, bson.D{
		{Key: "$push", Value: bson.D{{Key: "measurements", Value: bson.D{{Key: "$each", Value: arr}}}, {Key: "writes", Value: write}}},
		{Key: "$inc", Value: bson.D{{Key: "count", Value: int32(3)}, {Key: "summary.temp.sum", Value: 63.75}, {Key: "summary.hum.sum", Value: 123.0}}},
		{Key: "$min", Value: bson.D{{Key: "first", Value: date("2026-03-01T10:00:00Z")}, {Key: "summary.temp.min", Value: 19.0}, {Key: "summary.hum.min", Value: 40.0}}},
		{Key: "$max", Value: bson.D{{Key: "last", Value: date("2026-03-01T10:20:00Z")}, {Key: "summary.temp.max", Value: 23.25}, {Key: "summary.hum.max", Value: 42.0}}},
	}, s.pushUpdate(each(arr), &sp, &write))

	oid := bson.NewObjectID()
	bucket, err := bson.Marshal(bson.D{
		{Key: "_id", Value: oid},
		{Key: "sensor", Value: m},
		{Key: "start", Value: start},
		{Key: "first", Value: date("2026-03-01T10:00:00Z")},
		{Key: "last", Value: date("2026-03-01T10:20:00Z")},
		{Key: "count", Value: int32(3)},
		{Key: "summary", Value: bson.D{
			{Key: "temp", Value: bson.D{{Key: "min", Value: 19.0}, {Key: "max", Value: 23.25}, {Key: "sum", Value: 63.75}}},
			{Key: "hum", Value: bson.D{{Key: "min", Value: 40.0}, {Key: "max", Value: 42.0}, {Key: "sum", Value: 123.0}}},
		}},
		{Key: "measurements", Value: arr},
		{Key: "writes", Value: bson.A{oid}},
	})
	require.NoError(t, err)
	require.Equal(t, bson.Raw(bucket), s.newBucket(oid, m, start, arr, &sp))
	filter, update, err := s.reinsertBucket(bucket)
	require.NoError(t, err)
	fields, err := bson.Raw(bucket).Elements()
	require.NoError(t, err)
	require.Equal(t, bson.D{
		{Key: "_id", Value: bson.RawValue{Type: bson.TypeObjectID, Value: oid[:]}},
		{Key: "sensor", Value: fields[1].Value()},
		{Key: "start", Value: fields[2].Value()},
	}, filter, "the _id and the whole shard key {sensor: \"hashed\", start: 1}")
	var rest bson.D
	for _, e := range fields[3:] {
		rest = append(rest, bson.E{Key: e.Key(), Value: e.Value()})
	}
	require.Equal(t, bson.D{{Key: "$setOnInsert", Value: rest}}, update, "the bucket but its _id, meta and start, inserted unless its _id exists")

	m2, err := metaValue("s-2")
	require.NoError(t, err)
	room := bson.D{{Key: "$lt", Value: int32(200)}}
	one := windows{metas: bson.A{m}, starts: bson.A{start, start + 3600000}}
	require.Equal(t, bson.D{
		{Key: "sensor", Value: m}, {Key: "start", Value: bson.D{{Key: "$in", Value: one.starts}}}, {Key: "count", Value: room},
	}, s.openFilter([]windows{one}), "one series: an equality on its meta")
	both := windows{metas: bson.A{m, m2}, starts: bson.A{start}}
	require.Equal(t, bson.D{
		{Key: "sensor", Value: bson.D{{Key: "$in", Value: both.metas}}}, {Key: "start", Value: bson.D{{Key: "$in", Value: both.starts}}}, {Key: "count", Value: room},
	}, s.openFilter([]windows{both}), "series written to in the same windows: the set of their metas")
	two := windows{metas: bson.A{m2}, starts: bson.A{start}}
	require.Equal(t, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "sensor", Value: m}, {Key: "start", Value: bson.D{{Key: "$in", Value: one.starts}}}, {Key: "count", Value: room}},
		bson.D{{Key: "sensor", Value: m2}, {Key: "start", Value: bson.D{{Key: "$in", Value: two.starts}}}, {Key: "count", Value: room}},
	}}}, s.openFilter([]windows{one, two}), "sets of series in other windows: a branch each")
	m3, err := metaValue("s-3")
	require.NoError(t, err)
	h := start + 3600000
	require.Equal(t, []windows{
		{metas: bson.A{m, m3}, starts: bson.A{start, h}},
		{metas: bson.A{m2}, starts: bson.A{start}},
	}, sameWindows([]seriesWindows{
		{meta: m, starts: []bson.DateTime{h, start}},
		{meta: m2, starts: []bson.DateTime{start}},
		{meta: m3, starts: []bson.DateTime{start, h}},
	}), "series grouped by their set of windows (in any order), exactly the pairs written to, in the order first seen")
	d1, err := metaValue(bson.D{{Key: "s", Value: int32(7)}})
	require.NoError(t, err)
	d2, err := metaValue(bson.D{{Key: "s", Value: int32(8)}})
	require.NoError(t, err)
	require.Equal(t, []windows{
		{metas: bson.A{m, m2}, starts: bson.A{start}},
		{metas: bson.A{d1}, starts: bson.A{start}},
		{metas: bson.A{d2}, starts: bson.A{start}},
	}, sameWindows([]seriesWindows{
		{meta: m, starts: []bson.DateTime{start}},
		{meta: d1, starts: []bson.DateTime{start}},
		{meta: m2, starts: []bson.DateTime{start}},
		{meta: d2, starts: []bson.DateTime{start}},
	}), "a series whose meta is a document is read by equality, alone (FerretDB 2.7's $in compares the numbers inside documents by type)")
	require.Equal(t, bson.D{{Key: "sensor", Value: 1}, {Key: "start", Value: 1}, {Key: "count", Value: 1}}, s.openProjection())

	w1, w2 := bson.NewObjectID(), bson.NewObjectID()
	first := window{meta: m, start: start, writes: bson.A{w1, w2}}
	require.Equal(t, bson.D{
		{Key: "sensor", Value: m}, {Key: "start", Value: start}, {Key: "writes", Value: bson.D{{Key: "$in", Value: bson.A{w1, w2}}}},
	}, s.writtenFilter([]window{first}))
	second := window{meta: m2, start: start, writes: bson.A{w1}}
	require.Equal(t, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "sensor", Value: m}, {Key: "start", Value: start}, {Key: "writes", Value: bson.D{{Key: "$in", Value: bson.A{w1, w2}}}}},
		bson.D{{Key: "sensor", Value: m2}, {Key: "start", Value: start}, {Key: "writes", Value: bson.D{{Key: "$in", Value: bson.A{w1}}}}},
	}}}, s.writtenFilter([]window{first, second}))
	require.Equal(t, bson.D{{Key: "writes", Value: 1}}, writesProjection())
}

func TestIndexesPinned(t *testing.T) {
	cfg := pinnedConfig
	cfg.TTL = 24 * time.Hour
	b, err := New[string, pinnedReading](mongotest.Client().Database("pinned"), cfg)
	require.NoError(t, err)
	var keys []bson.D
	var ttl []*int32
	for _, ix := range b.Indexes() {
		keys = append(keys, ix.Model.Keys.(bson.D))
		var o options.IndexOptions
		if ix.Model.Options != nil {
			for _, set := range ix.Model.Options.List() {
				require.NoError(t, set(&o))
			}
		}
		ttl = append(ttl, o.ExpireAfterSeconds)
	}
	require.Equal(t, []bson.D{
		{{Key: "sensor", Value: 1}, {Key: "start", Value: 1}, {Key: "count", Value: 1}},
		{{Key: "start", Value: 1}},
		{{Key: "last", Value: 1}},
	}, keys)
	require.Nil(t, ttl[0])
	require.Nil(t, ttl[1])
	require.EqualValues(t, 86400, *ttl[2])
}

// TestCommandsPerPlan pins, for the plan of every server the library
// knows, what varies with it: how many update statements AddMany puts in a
// command, whether Summaries aggregates on the server (summaryPipeline)
// or reads bucket summaries and measurements (the finds of the client
// path), whether a TTL and a time-series store are refused.
func TestCommandsPerPlan(t *testing.T) {
	want := map[string]struct {
		updatesPerCommand int
		serverSummaries   bool
		ttl, timeSeries   bool
	}{
		"MongoDB 8 replica set": {0, true, true, true},
		"MongoDB 6 standalone":  {0, true, true, true},
		"FerretDB 2.7":          {0, true, true, false},
		"FerretDB 1.24":         {1, false, false, false},
		"other":                 {1, false, false, false},
	}
	for _, name := range mongotest.Mongos() {
		want[name] = want["MongoDB 6 standalone"]
	}
	s := pinnedSettings(t, Config{Collection: "readings", TimeField: "at", Window: time.Hour, Cap: 10, TTL: time.Hour})
	for name, srv := range mongotest.KnownServers() {
		t.Run(name, func(t *testing.T) {
			w, d := want[name], decided{plan: planFor(srv), server: srv.String()}
			require.Equal(t, w.updatesPerCommand, updatesPerCommand(d.plan))
			require.Equal(t, w.serverSummaries, d.plan.serverSummaries)
			require.Equal(t, w.ttl, d.checkTTL(s) == nil)
			require.Equal(t, w.timeSeries, d.require(d.plan.timeSeries, patterns.FeatureTimeSeries) == nil)
		})
	}
}

// TestShortcutsEncodeAsTheEncoder: the shortcuts AddMany and Add take
// give the bytes the driver's encoder gives: metas that are strings or
// ObjectIDs, and measurements encoded one after the other into one
// buffer.
func TestShortcutsEncodeAsTheEncoder(t *testing.T) {
	for _, v := range []any{"", "s-1", "a\x00b", "é", bson.NewObjectID()} {
		typ, data, err := bson.MarshalValue(v)
		require.NoError(t, err)
		got, err := metaValue(v)
		require.NoError(t, err)
		require.Equal(t, bson.RawValue{Type: typ, Value: data}, got, "%q", v)
	}
	enc := newEncoder(0)
	for i := range 50 {
		r := pinnedReading{At: time.Date(2026, 3, 1, 10, i, 0, 0, time.UTC), Temp: float64(i) / 3, Hum: int64(i)}
		want, err := bson.Marshal(r)
		require.NoError(t, err)
		got, err := enc.add(&r)
		require.NoError(t, err)
		require.Equal(t, bson.Raw(want), got)
	}
	_, err := enc.add(new(int))
	require.Error(t, err, "not a document")
}

// TestSummariesBySeriesPinned: SummariesBySeries filters the buckets of
// every series by window start, first and last (the overlap of Range and
// Summaries without the meta); on the server path it makes one row of
// each bucket (its stored summary when its measurements lie in [from,
// to), else the sum, min and max of those of its measurements that do,
// picked by $filter, with no $unwind; a $limit that drops nothing between
// its two $project stages), keeps one copy of each bucket,
// drops the rows without measurements in [from, to), groups by meta and
// sorts by meta; on the client path it reads the buckets, all but their
// writes, sorted by meta, then start. The time-series store groups its
// measurements in [from, to) by meta.
func TestSummariesBySeriesPinned(t *testing.T) {
	s := pinnedSettings(t, Config{Collection: "readings", TimeField: "at", ValueFields: []string{"temp"}, MetaField: "sensor", Window: time.Hour, Cap: 100})
	from, to := date("2026-03-01T10:30:00Z"), date("2026-03-01T11:30:00Z")
	r := read{from: from, to: to}
	g := wholeGrid(r)
	require.Equal(t, grid{from: from, to: to, step: 3600000}, g)
	filter := s.windowOverlap(r)
	require.Equal(t, bson.D{
		{Key: "start", Value: bson.D{{Key: "$gt", Value: date("2026-03-01T09:30:00Z")}, {Key: "$lt", Value: to}}},
		{Key: "first", Value: bson.D{{Key: "$lt", Value: to}}},
		{Key: "last", Value: bson.D{{Key: "$gte", Value: from}}},
	}, filter)
	require.Equal(t, bson.D{{Key: "sensor", Value: 1}, {Key: "start", Value: 1}}, s.byMetaThenStart())
	require.Equal(t, bson.D{{Key: "writes", Value: 0}}, withoutWrites())

	whole := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gte", Value: bson.A{"$first", from}}},
		bson.D{{Key: "$lt", Value: bson.A{"$last", to}}},
	}}}
	ifWhole := func(yes, no any) bson.D { return bson.D{{Key: "$cond", Value: bson.A{"$w", yes, no}}} }
	require.Equal(t, mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$project", Value: bson.D{
			{Key: "m", Value: "$sensor"},
			{Key: "n", Value: "$count"},
			{Key: "w", Value: whole},
			{Key: "s", Value: "$summary"},
			{Key: "p", Value: bson.D{{Key: "$cond", Value: bson.A{whole, bson.A{}, bson.D{{Key: "$filter", Value: bson.D{
				{Key: "input", Value: "$measurements"},
				{Key: "cond", Value: bson.D{{Key: "$and", Value: bson.A{
					bson.D{{Key: "$gte", Value: bson.A{"$$this.at", from}}},
					bson.D{{Key: "$lt", Value: bson.A{"$$this.at", to}}},
				}}}},
			}}}}}}},
		}}},
		{{Key: "$limit", Value: int64(math.MaxInt64)}},
		{{Key: "$project", Value: bson.D{
			{Key: "n", Value: "$n"},
			{Key: "m", Value: "$m"},
			{Key: "c", Value: ifWhole("$n", bson.D{{Key: "$size", Value: "$p"}})},
			{Key: "sum0", Value: ifWhole("$s.temp.sum", bson.D{{Key: "$sum", Value: "$p.temp"}})},
			{Key: "min0", Value: ifWhole("$s.temp.min", bson.D{{Key: "$min", Value: "$p.temp"}})},
			{Key: "max0", Value: ifWhole("$s.temp.max", bson.D{{Key: "$max", Value: "$p.temp"}})},
			{Key: "n0", Value: ifWhole(
				bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isNumber", Value: "$s.temp.sum"}}, "$n", 0}}},
				bson.D{{Key: "$subtract", Value: bson.A{
					bson.D{{Key: "$size", Value: "$p.temp"}},
					bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$in", Value: bson.A{nil, "$p.temp"}}}, 1, 0}}},
				}}},
			)},
		}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "b", Value: bson.D{{Key: "$max", Value: bson.D{
			{Key: "n", Value: "$n"}, {Key: "m", Value: "$m"}, {Key: "c", Value: "$c"},
			{Key: "sum0", Value: "$sum0"}, {Key: "min0", Value: "$min0"}, {Key: "max0", Value: "$max0"}, {Key: "n0", Value: "$n0"},
		}}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "b.c", Value: bson.D{{Key: "$gt", Value: 0}}}}}},
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: bson.D{{Key: "k", Value: "$b.m"}}},
			{Key: "count", Value: bson.D{{Key: "$sum", Value: "$b.c"}}},
			{Key: "sum0", Value: bson.D{{Key: "$sum", Value: "$b.sum0"}}},
			{Key: "min0", Value: bson.D{{Key: "$min", Value: "$b.min0"}}},
			{Key: "max0", Value: bson.D{{Key: "$max", Value: "$b.max0"}}},
			{Key: "n0", Value: bson.D{{Key: "$sum", Value: "$b.n0"}}},
		}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}, s.seriesPipeline(filter, g))

	require.Equal(t, bson.D{{Key: "at", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}}}, s.timeFilter(r))
	tsGroup := bson.D{
		{Key: "_id", Value: bson.D{{Key: "k", Value: "$sensor"}}},
		{Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}},
		{Key: "psum0", Value: bson.D{{Key: "$sum", Value: "$temp"}}},
		{Key: "pmin0", Value: bson.D{{Key: "$min", Value: "$temp"}}},
		{Key: "pmax0", Value: bson.D{{Key: "$max", Value: "$temp"}}},
		{Key: "n0", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isNumber", Value: "$temp"}}, 1, 0}}}}}},
	}
	require.Equal(t, mongo.Pipeline{
		{{Key: "$match", Value: s.timeFilter(r)}},
		{{Key: "$group", Value: tsGroup}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}, s.timeSeriesSeriesPipeline(s.timeFilter(r)))
}
