// Package doctor finds the schema and index anti-patterns of a live
// MongoDB database, the ones the schema design guides this library follows
// end with: unbounded arrays, bloated documents, values stored as field
// names, many small time-stamped documents, too many or redundant or
// unused indexes, too many collections, compound indexes over two different
// arrays, indexes out of Equality, Sort, Range order, unindexed and
// case-insensitive queries, shard keys of low cardinality, skewed
// frequency or monotonic growth, and aggregation pipelines that block
// index use. It is the open counterpart of Atlas's schema advisor, for any
// deployment this library supports; the command mongopatterns doctor
// (cmd/mongopatterns) runs it from a shell or a CI job.
//
//	rep, err := doctor.Check(ctx, client.Database("shop"), doctor.Options{
//		Queries: []doctor.Query{{Collection: "orders",
//			Filter: bson.D{{Key: "status", Value: "paid"}}, Sort: bson.D{{Key: "createdAt", Value: -1}}}},
//	})
//	if err != nil { ... }
//	rep.WriteText(os.Stdout)
//
// # What it reads
//
// [Check] samples each collection: $sample of [DefaultSampleSize]
// documents (a collection no larger is read whole; Options.FullScan reads
// everything), measured on the client from the documents' raw bytes, so
// sizes are exact without $bsonSize. It reads listCollections,
// listIndexes, $collStats and $indexStats, and runs explain at
// queryPlanner verbosity for the query shapes it is given, which plans a
// query without running it. It writes nothing. [CheckIndexes] compares a
// repository's Indexes() with listIndexes; [AnalyzeShardKey] measures a
// proposed shard key from the sample; [LintPipeline] reads a pipeline and
// the indexes of its $lookup collections. Each function's documentation
// lists its commands.
//
// # Findings
//
// Every [Finding] carries a stable rule id (the Rule constants, listed in
// [Rules]), the collection, the field or index, the evidence (the numbers
// measured, with the threshold crossed), a [Severity] and a one-line
// remedy that names the package of this library that fixes it where there
// is one: subset or outlier for unbounded arrays, bucket for many small
// time-stamped documents, extref for $lookups read for a few fields, the
// attribute pattern for dynamic field names. A [Report] sorts its
// findings by severity, collection, rule and field, so that its text
// ([Report.WriteText]), JSON (encoding/json) and HTML ([Report.WriteHTML])
// forms are stable from run to run.
//
// # Thresholds
//
// The defaults and their sources: arrays of more than 1,000 elements are
// a warning (MongoDB's anti-pattern guide) and of more than 10,000
// critical (Atlas's schema advisor); documents over 2 MB a warning
// (Atlas's schema advisor) and over 8 MiB, half the 16 MiB limit,
// critical; more than 30 indexes on a collection and more than 100
// collections in a database are warnings (Atlas's schema advisor); a
// shard key is monotonic when its rank correlation with insertion order
// reaches 0.7 (analyzeShardKey's threshold). The other defaults are this
// package's choices, documented beside them in [Thresholds]; every one is
// an option.
//
// # Servers
//
// A rule the server does not let it evaluate is listed in
// Report.Skipped with the server's own answer, never guessed and never
// passed in silence. The package branches on what the server answers,
// not on its name:
//
//   - MongoDB 6.0+ answers everything: $sample picks a random sample,
//     $indexStats counts index use, explain's queryPlanner.winningPlan
//     says COLLSCAN or IXSCAN.
//   - FerretDB 1.24 (the embedded dev server of the tests) refuses $sample
//     and $indexStats (NotImplemented): the sample is then the first
//     documents in natural order, as the report notes, and unused-index
//     is skipped. Its explain returns SQLite's query plan
//     (queryPlanner.Plan: "SCAN orders_325e96ec"), which says SCAN for
//     every filter measured, _id lookups included: it cannot say whether
//     an index serves a query, so it claims no scan. The indexes alone
//     judge the shape, and a shape they serve is an info finding, "plan
//     unreadable", not a warning.
//   - FerretDB 2.x returns PostgreSQL's plan (nodes with a "Node Type",
//     "Seq Scan" or "Bitmap Index Scan" with an "Index Name"), which the
//     package reads too.
//   - An explain in any other form is not readable either: the finding
//     says so, with the keys it held, and the index analysis of the shape
//     stands alone.
//
// # Costs
//
// On the embedded FerretDB, a check of the seven small collections of
// doctortest.AntiPatterns sends 24 commands and takes under a second. On a production
// server the sample dominates: SampleSize documents per collection, one
// collection at a time, at most Options.SampleBytes each.
package doctor
