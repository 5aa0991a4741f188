package subset

import "go.mongodb.org/mongo-driver/v2/bson"

// Plan is the repository's path, for tests run per plan
// (mongotest.RunPlans).
type Plan = plan

// PlanFor is the pure plan function.
var PlanFor = planFor

// ForcePlan makes the repository take plan p instead of the one its
// server would give it.
func ForcePlan[P, I any](r *Repo[P, I], p Plan) { r.planned.Set(p) }

// SetInsertBatchBytes makes Add insert its items in batches of at most
// n bytes of documents (insertBatchBytes otherwise), so that a test sends
// several inserts without 32 MiB of items.
func SetInsertBatchBytes[P, I any](r *Repo[P, I], n int) { r.insertBatch = n }

// InsertBatchSizes returns the sizes of the batches Add would insert
// items of the given document sizes in, at most maxBytes bytes each.
func InsertBatchSizes(docSizes []int, maxBytes int) []int {
	entries := make([]entry, len(docSizes))
	for i, n := range docSizes {
		entries[i].doc = make([]byte, n)
	}
	var out []int
	for b := range insertBatches(entries, maxBytes) {
		out = append(out, len(b))
	}
	return out
}

// InsertBatchBytes and InsertBatchCount are the bounds of Add's batches.
const (
	InsertBatchBytes = insertBatchBytes
	InsertBatchCount = insertBatchCount
)

// IDBatchSizes returns the sizes of the batches of ids of the given
// value sizes that Add names in an $in each.
func IDBatchSizes(idSizes []int) []int {
	ids := make([]bson.RawValue, len(idSizes))
	for i, n := range idSizes {
		ids[i].Value = make([]byte, n)
	}
	var out []int
	for b := range idBatches(ids) {
		out = append(out, len(b))
	}
	return out
}
