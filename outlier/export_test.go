package outlier

// Plan is the repository's path on a server, for mongotest.RunPlans.
type Plan = plan

// PlanFor is the repository's pure plan function.
var PlanFor = planFor

// ForcePlan makes r take the plan p, whatever its server is.
func ForcePlan[P, I any](r *Repo[P, I], p Plan) { r.planned.Set(p) }
