package bucket

import "github.com/mongopatterns/mongopatterns/internal/mongotest"

// Plan is a store's server path, for mongotest.RunPlans.
type Plan = plan

// PlanFor is the pure plan function.
var PlanFor = planFor

// ForcePlan makes b take the path of p instead of its server's.
func ForcePlan[M, V any](b *Buckets[M, V], p Plan) { b.planned.Set(forced(p)) }

// ForceTimeSeriesPlan makes ts take the path of p instead of its
// server's.
func ForceTimeSeriesPlan[M, V any](ts *TimeSeries[M, V], p Plan) { ts.planned.Set(forced(p)) }

func forced(p Plan) decided { return decided{plan: p, server: mongotest.Server().String()} }

// ServerSummaries reports whether p aggregates summaries on the server.
func ServerSummaries(p Plan) bool { return p.serverSummaries }
