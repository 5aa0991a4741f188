package bucket

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is what a store decided about its server on first use; it does not
// change afterwards. Every branch on the server reads one of its fields.
type plan struct {
	// serverSummaries: Summaries and SummariesBySeries aggregate on the
	// server, which has the
	// $group accumulators $min and $max
	// ([patterns.FeatureGroupMinMaxAvg]); otherwise it computes them in
	// the client from the bucket summaries and measurements.
	serverSummaries bool
	// batchedUpdates: an update command may carry many statements
	// ([patterns.FeatureBatchedUpdates]); otherwise AddMany sends one
	// update statement per command, so that the outcome of each is known.
	batchedUpdates bool
	// ttlIndexes: the server has TTL indexes, which Config.TTL needs
	// ([patterns.FeatureTTLIndexes]).
	ttlIndexes bool
	// timeSeries: the server has native time-series collections
	// ([patterns.FeatureTimeSeries]); otherwise [TimeSeries] refuses
	// every call.
	timeSeries bool
	// timeSeriesBucketing: it takes bucketMaxSpanSeconds and
	// bucketRoundingSeconds, and creates the index {<meta>, <time>} with
	// the collection ([patterns.FeatureTimeSeriesCustomBucketing]).
	timeSeriesBucketing bool
	// timeSeriesDeletes: it deletes from a time-series collection by time
	// ([patterns.FeatureTimeSeriesDeletes]).
	timeSeriesDeletes bool
}

// planFor is the plan for srv.
func planFor(srv *patterns.Server) plan {
	return plan{
		serverSummaries:     srv.Has(patterns.FeatureGroupMinMaxAvg),
		batchedUpdates:      srv.Has(patterns.FeatureBatchedUpdates),
		ttlIndexes:          srv.Has(patterns.FeatureTTLIndexes),
		timeSeries:          srv.Has(patterns.FeatureTimeSeries),
		timeSeriesBucketing: srv.Has(patterns.FeatureTimeSeriesCustomBucketing),
		timeSeriesDeletes:   srv.Has(patterns.FeatureTimeSeriesDeletes),
	}
}

// decided is a store's plan and the server it was decided for, which
// errors name.
type decided struct {
	plan   plan
	server string
	// series: the store is a [TimeSeries], whose path names the
	// features of time-series collections ([plan.seriesPath]); else a
	// [Buckets] ([plan.bucketsPath]).
	series bool
}

// decide returns the plan of a store on client, deciding it on first use
// (two commands, once per client; see [lazy.Decide]); series says that
// the store is a [TimeSeries].
func decide(ctx context.Context, v *lazy.Value[decided], client *mongo.Client, series bool) (decided, error) {
	return lazy.Decide(ctx, v, client, func(srv *patterns.Server) decided {
		return decided{plan: planFor(srv), server: srv.String(), series: series}
	})
}

// require returns an [*patterns.UnsupportedError] naming f when has is
// false.
func (d decided) require(has bool, f patterns.Feature) error {
	if has {
		return nil
	}
	return &patterns.UnsupportedError{Feature: f, Server: d.server}
}

// checkTTL refuses a store with a TTL on a server without TTL indexes.
func (d decided) checkTTL(s *settings) error {
	if s.ttl > 0 {
		return d.require(d.plan.ttlIndexes, patterns.FeatureTTLIndexes)
	}
	return nil
}

// Path names the store's path for a [patterns.Hook]: the path of its
// type on the plan.
func (d decided) Path() (string, []patterns.Feature) {
	if d.series {
		return d.plan.seriesPath()
	}
	return d.plan.bucketsPath()
}

// bucketsPath is the path of a [Buckets] on p: native where it relies on
// the server's summaries, its update commands of several statements and
// its TTL indexes.
func (p plan) bucketsPath() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeatureGroupMinMaxAvg, Relies: p.serverSummaries},
		lazy.Use{Feature: patterns.FeatureBatchedUpdates, Relies: p.batchedUpdates},
		lazy.Use{Feature: patterns.FeatureTTLIndexes, Relies: p.ttlIndexes},
	)
}

// seriesPath is the path of a [TimeSeries] on p: native where it relies
// on the server's time-series collections, their custom bucketing and
// their deletes by time.
func (p plan) seriesPath() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeatureTimeSeries, Relies: p.timeSeries},
		lazy.Use{Feature: patterns.FeatureTimeSeriesCustomBucketing, Relies: p.timeSeriesBucketing},
		lazy.Use{Feature: patterns.FeatureTimeSeriesDeletes, Relies: p.timeSeriesDeletes},
	)
}
