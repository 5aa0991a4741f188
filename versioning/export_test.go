package versioning

// Plan is the repository's plan, for the tests: what RunPlans runs a test
// under.
type Plan = plan

// PlanFor is the plan function, for RunPlans.
var PlanFor = planFor

// ForcePlan makes r take plan p instead of the one its server gives; call
// it before r's first use.
func ForcePlan[T any](r *Repo[T], p Plan) { r.planned.Set(p) }
