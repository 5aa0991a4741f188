package doctor

// Rule ids. Each [Finding] and [Skip] names one; the ids are stable, so a
// CI job or a dashboard can key on them.
const (
	// Schema rules, from the sampled documents of each collection.

	// RuleUnboundedArray: an array longer than [Thresholds].ArrayLength.
	RuleUnboundedArray = "unbounded-array"
	// RuleBloatedDocument: a document larger than [Thresholds].DocumentBytes.
	RuleBloatedDocument = "bloated-document"
	// RuleDynamicFieldNames: values stored as field names
	// ({"attr_color": "blue"} instead of {"k": "color", "v": "blue"}).
	RuleDynamicFieldNames = "dynamic-field-names"
	// RuleTimeSeriesDocuments: many small documents that each hold one
	// time-stamped measurement.
	RuleTimeSeriesDocuments = "time-series-documents"

	// Index rules, from listIndexes, $indexStats and the sample.

	// RuleTooManyIndexes: more than [Thresholds].Indexes indexes on a collection.
	RuleTooManyIndexes = "too-many-indexes"
	// RuleRedundantIndex: an index whose key is a prefix of another's.
	RuleRedundantIndex = "redundant-index"
	// RuleUnusedIndex: an index no operation used since its statistics began.
	RuleUnusedIndex = "unused-index"
	// RuleMultikeyCompound: a compound index whose fields run through two
	// different arrays (fields of one array's elements are valid).
	RuleMultikeyCompound = "multikey-compound"
	// RuleMissingIndex: an index a repository declares is absent or differs.
	RuleMissingIndex = "missing-index"

	// Database rules.

	// RuleTooManyCollections: more than [Thresholds].Collections collections.
	RuleTooManyCollections = "too-many-collections"

	// Query-shape rules, for the [Query] values given in [Options].Queries.

	// RuleUnindexedQuery: no index serves the shape, or the server's plan
	// scans the collection. A field matched by a case-insensitive $regex
	// is left to RuleCaseInsensitiveRegex: an ordinary index on it would
	// not help.
	RuleUnindexedQuery = "unindexed-query"
	// RuleESROrder: an index holds the shape's fields in an order that
	// breaks the Equality, Sort, Range rule.
	RuleESROrder = "esr-order"
	// RuleCaseInsensitiveRegex: a $regex with the "i" option, in a query
	// shape or a pipeline's $match.
	RuleCaseInsensitiveRegex = "case-insensitive-regex"

	// Shard-key rules, for the [ShardKey] values given in [Options].ShardKeys.

	// RuleShardKeyCardinality: too few distinct values to split into chunks.
	RuleShardKeyCardinality = "shard-key-cardinality"
	// RuleShardKeyFrequency: one value holds too large a share of the
	// documents, and at least twice an even share.
	RuleShardKeyFrequency = "shard-key-frequency"
	// RuleShardKeyMonotonic: values grow with insertion order, so every
	// insert goes to the last chunk.
	RuleShardKeyMonotonic = "shard-key-monotonic"
	// RuleShardKeyArray: a shard key field holds arrays, which MongoDB refuses.
	RuleShardKeyArray = "shard-key-array"
	// RuleShardKeyScatterGather: a query shape would be sent to every shard.
	RuleShardKeyScatterGather = "shard-key-scatter-gather"
	// RuleShardKeyIndex: no index of the collection supports the key (an
	// index whose key starts with the shard key's fields and values, neither
	// sparse, partial nor hidden, with the simple collation), which
	// shardCollection requires of a collection that holds documents.
	RuleShardKeyIndex = "shard-key-index"
	// RuleShardKeyTimeSeries: a key that a time-series collection cannot
	// be sharded on (only its metaField, fields inside it, and its
	// timeField, ranged and last), or one that names its timeField.
	RuleShardKeyTimeSeries = "shard-key-time-series"

	// Pipeline rules, for the [Pipeline] values given in [Options].Pipelines.

	// RulePipelineMatchLate: a $match after stages it could precede. It
	// moves a $match only past stages that keep documents whole ($sort,
	// projections and $addFields that leave its fields alone, $lookup,
	// $unwind), never past $group or another stage that makes new
	// documents: a $match on the group key after a $group (which could
	// move before it, the key renamed to the grouped field) is not
	// reported.
	RulePipelineMatchLate = "pipeline-match-late"
	// RulePipelineProjectLate: a $project or $unset after stages that carry
	// the fields it drops.
	RulePipelineProjectLate = "pipeline-project-late"
	// RulePipelineLookupUnindexed: a $lookup whose foreign field has no index.
	RulePipelineLookupUnindexed = "pipeline-lookup-unindexed"
	// RulePipelineLookupExtref: a $lookup of which the pipeline reads only
	// a few fields.
	RulePipelineLookupExtref = "pipeline-lookup-extref"
)

// RuleInfo describes a rule: its id, what it finds and what it reads.
type RuleInfo struct {
	ID    string
	About string // what the rule finds, one line
	Reads string // what the rule reads from the server
}

// Rules lists every rule in a fixed order, for help texts and for
// validating [Options].Disable.
var Rules = []RuleInfo{
	{RuleUnboundedArray, "arrays longer than 1,000 elements (warning) or 10,000 (critical)", "the sample"},
	{RuleBloatedDocument, "documents larger than 2 MB (warning) or 8 MiB (critical)", "the sample"},
	{RuleDynamicFieldNames, "values stored as field names: a family of keys that each document holds few of, or keys that look like values", "the sample"},
	{RuleTimeSeriesDocuments, "many small documents that each hold one time-stamped measurement", "the sample and $collStats"},
	{RuleTooManyIndexes, "more than 30 indexes on a collection", "listIndexes"},
	{RuleRedundantIndex, "an index whose key is a prefix of another index's key", "listIndexes"},
	{RuleUnusedIndex, "an index no operation used in at least 7 days of statistics", "$indexStats"},
	{RuleMultikeyCompound, "a compound index over two different arrays (fields of one array's elements may share one)", "listIndexes and the sample"},
	{RuleMissingIndex, "an index a repository declares (Indexes()) that is absent or differs", "listIndexes"},
	{RuleTooManyCollections, "more than 100 collections in the database", "listCollections"},
	{RuleUnindexedQuery, "a query shape no index serves, or that the server's plan runs as a collection scan", "listIndexes and explain (queryPlanner)"},
	{RuleESROrder, "an index that holds a query shape's fields out of Equality, Sort, Range order", "listIndexes"},
	{RuleCaseInsensitiveRegex, "a query shape or pipeline $match with a case-insensitive $regex", "the query shape or pipeline"},
	{RuleShardKeyCardinality, "a proposed shard key with too few distinct values", "a sample of the key's values"},
	{RuleShardKeyFrequency, "a proposed shard key value that holds more than 10% of the documents, and twice an even share", "a sample of the key's values"},
	{RuleShardKeyMonotonic, "a proposed shard key that grows with insertion order (ObjectIds, timestamps)", "the key's values in natural order"},
	{RuleShardKeyArray, "a proposed shard key field that holds arrays", "a sample of the key's values"},
	{RuleShardKeyScatterGather, "a query shape that a proposed shard key would send to every shard", "the query shape"},
	{RuleShardKeyIndex, "a proposed shard key that no index of the collection supports (shardCollection needs one on a collection holding documents)", "listIndexes"},
	{RuleShardKeyTimeSeries, "a proposed shard key on a time-series collection naming a field other than its metaField (or fields inside it) and its timeField (ranged, last; deprecated in 8.0)", "listCollections"},
	{RulePipelineMatchLate, "a $match after stages it could precede, so it cannot use an index (never moved past a $group, even on the group key)", "the pipeline"},
	{RulePipelineProjectLate, "a $project or $unset after $lookup, $unwind or $sort stages that carry the fields it drops", "the pipeline"},
	{RulePipelineLookupUnindexed, "a $lookup whose foreign field has no index", "the pipeline and listIndexes of the foreign collection"},
	{RulePipelineLookupExtref, "a $lookup of which the pipeline reads only a few fields", "the pipeline"},
	{RuleValidatorDrift, "a collection validator that differs from the one its Go type gives, per field (Options.Validators.Types)", "listCollections"},
	{RuleMissingValidator, "a collection without a validator, or with one that enforces nothing (level off, action warn) (info; Options.Validators)", "listCollections"},
	{RuleShardKeyUniqueIndex, "on a mongos, a declared unique index the collection's shard key does not prefix (refused, code 67)", "config.collections"},
	{RuleShardKeyDeclaredQueries, "on a mongos, a declared index whose queries the collection's shard key sends to every shard", "config.collections"},
}

// knownRule reports whether id names a rule of [Rules].
func knownRule(id string) bool {
	for _, r := range Rules {
		if r.ID == id {
			return true
		}
	}
	return false
}
