package bucket

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestPlanFor(t *testing.T) {
	mongos7 := plan{
		serverSummaries: true, batchedUpdates: true, ttlIndexes: true,
		timeSeries: true, timeSeriesBucketing: true, timeSeriesDeletes: true,
	}
	want := map[string]plan{
		"MongoDB 8 replica set": {
			serverSummaries: true, batchedUpdates: true, ttlIndexes: true,
			timeSeries: true, timeSeriesBucketing: true, timeSeriesDeletes: true,
		},
		"MongoDB 6 standalone": {
			serverSummaries: true, batchedUpdates: true, ttlIndexes: true,
			timeSeries: true,
		},
		// A mongos as the shards' version: time-series collections
		// (5.0+), bucketRoundingSeconds (6.3+) and deletes on them
		// (7.0+, so every later mongos: mongos7); the FCV decides none.
		"MongoDB 6.0 mongos": {
			serverSummaries: true, batchedUpdates: true, ttlIndexes: true,
			timeSeries: true,
		},
		// Server summaries, update commands of several statements and
		// TTL indexes; no time-series collections (it would create a
		// plain collection).
		"FerretDB 2.7": {serverSummaries: true, batchedUpdates: true, ttlIndexes: true},
		// Nothing: client summaries, one statement per command, no TTL,
		// no time-series collections.
		"FerretDB 1.24": {},
		"other":         {},
	}
	for _, name := range mongotest.Mongos()[1:] {
		want[name] = mongos7
	}
	servers := mongotest.KnownServers()
	require.Len(t, want, len(servers), "every known server has a row")
	for name, srv := range servers {
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			require.True(t, ok, "no expected plan for %s", name)
			require.Equal(t, w, planFor(srv))
		})
	}
	require.Equal(t, plan{}, planFor(mongotest.Portable()), "the portable plan needs no feature")
}

// TestPath: each type of store names its own path to its hook, from the
// features of the plan it relies on: a Buckets the server summaries,
// batched updates and TTL indexes; a TimeSeries the time-series
// collections, their custom bucketing and their deletes by time. Native
// where it relies on all of them. (TestPlanFor gives the plans of the
// known servers.)
func TestPath(t *testing.T) {
	type path struct {
		name     string
		features []patterns.Feature
	}
	none := path{"portable", []patterns.Feature{}}
	for _, c := range []struct {
		name            string
		plan            plan
		buckets, series path
	}{
		{"MongoDB 7.0+", plan{serverSummaries: true, batchedUpdates: true, ttlIndexes: true, timeSeries: true, timeSeriesBucketing: true, timeSeriesDeletes: true},
			path{"native", []patterns.Feature{patterns.FeatureGroupMinMaxAvg, patterns.FeatureBatchedUpdates, patterns.FeatureTTLIndexes}},
			path{"native", []patterns.Feature{patterns.FeatureTimeSeries, patterns.FeatureTimeSeriesCustomBucketing, patterns.FeatureTimeSeriesDeletes}}},
		{"MongoDB 6", plan{serverSummaries: true, batchedUpdates: true, ttlIndexes: true, timeSeries: true},
			path{"native", []patterns.Feature{patterns.FeatureGroupMinMaxAvg, patterns.FeatureBatchedUpdates, patterns.FeatureTTLIndexes}},
			path{"portable", []patterns.Feature{patterns.FeatureTimeSeries}}},
		{"FerretDB 2.7", plan{serverSummaries: true, batchedUpdates: true, ttlIndexes: true},
			path{"native", []patterns.Feature{patterns.FeatureGroupMinMaxAvg, patterns.FeatureBatchedUpdates, patterns.FeatureTTLIndexes}}, none},
		{"server summaries only", plan{serverSummaries: true}, path{"portable", []patterns.Feature{patterns.FeatureGroupMinMaxAvg}}, none},
		{"FerretDB 1.24", plan{}, none, none},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, features := decided{plan: c.plan}.Path()
			require.Equal(t, c.buckets, path{name, features}, "Buckets")
			name, features = decided{plan: c.plan, series: true}.Path()
			require.Equal(t, c.series, path{name, features}, "TimeSeries")
		})
	}
}
