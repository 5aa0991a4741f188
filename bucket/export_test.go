package bucket

// ForceClientSummaries makes b compute Summaries in the client even where
// the server could aggregate, so that tests compare both paths.
func ForceClientSummaries[M, V any](b *Buckets[M, V]) { b.forceClient = true }
