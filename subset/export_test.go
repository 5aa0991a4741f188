package subset

// Plan is the repository's path, for tests run per plan
// (mongotest.RunPlans).
type Plan = plan

// PlanFor is the pure plan function.
var PlanFor = planFor

// ForcePlan makes the repository take plan p instead of the one its
// server would give it.
func ForcePlan[P, I any](r *Repo[P, I], p Plan) { r.planned.Set(p) }
