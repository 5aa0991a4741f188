package bucket

import (
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Plan is a store's server path, for mongotest.RunPlans.
type Plan = plan

// PlanFor is the pure plan function.
var PlanFor = planFor

// ForcePlan makes b take the path of p instead of its server's.
func ForcePlan[M, V any](b *Buckets[M, V], p Plan) { b.planned.Set(forced(p)) }

// ForceTimeSeriesPlan makes ts take the path of p instead of its
// server's.
func ForceTimeSeriesPlan[M, V any](ts *TimeSeries[M, V], p Plan) { ts.planned.Set(forcedSeries(p)) }

func forced(p Plan) decided { return decided{plan: p, server: mongotest.Server().String()} }

// forcedSeries is forced for a TimeSeries.
func forcedSeries(p Plan) decided {
	d := forced(p)
	d.series = true
	return d
}

// BucketsPath and TimeSeriesPath are the paths a Buckets and a
// TimeSeries name to their hook on p.
func BucketsPath(p Plan) (string, []patterns.Feature)    { return p.bucketsPath() }
func TimeSeriesPath(p Plan) (string, []patterns.Feature) { return p.seriesPath() }

// HasTimeSeries reports whether p has time-series collections.
func HasTimeSeries(p Plan) bool { return p.timeSeries }

// ServerSummaries reports whether p aggregates summaries on the server.
func ServerSummaries(p Plan) bool { return p.serverSummaries }
