package extref

import "github.com/mongopatterns/mongopatterns/internal/mongotest"

// Plan is the repository's server path, for tests.
type Plan = plan

// PlanFor is planFor, for tests.
var PlanFor = planFor

// Keyless returns p taking writes without the shard key, which no
// detected server has (patterns.FeatureWritesWithoutShardKey).
func Keyless(p Plan) Plan {
	p.keylessWrites = true
	return p
}

// ForcePlan makes r take plan p whatever its server has, so that tests run
// every path the server can take (see mongotest.RunPlans).
func ForcePlan[S any](r *Ref[S], p Plan) {
	r.decided.Set(decision{plan: p, server: mongotest.Server().String()})
}
