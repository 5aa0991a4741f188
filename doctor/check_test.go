package doctor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/doctor"
	"github.com/mongopatterns/mongopatterns/doctor/doctortest"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// readCommands are the commands a check may send: it never writes.
var readCommands = []string{"listCollections", "listIndexes", "aggregate", "find", "getMore", "killCursors", "explain", "count"}

func seeded(t *testing.T, write func(context.Context, *mongo.Database) error) *mongo.Database {
	t.Helper()
	db := mongotest.DB(t)
	require.NoError(t, write(context.Background(), db))
	return db
}

// has returns the findings of a rule on a collection.
func has(rep doctor.Report, rule, coll string) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range rep.Findings {
		if f.Rule == rule && f.Collection == coll {
			out = append(out, f)
		}
	}
	return out
}

func mustQuery(t *testing.T, js string) doctor.Query {
	t.Helper()
	q, err := doctor.ParseQuery([]byte(js))
	require.NoError(t, err)
	return q
}

func TestCheckFindsEachSeededAntiPattern(t *testing.T) {
	ctx := context.Background()
	db := seeded(t, doctortest.AntiPatterns)
	counter := mongotest.NewCounter(t, db)
	var progress []doctor.Progress
	start := time.Now()
	rep, err := doctor.Check(ctx, db, doctor.Options{Progress: func(p doctor.Progress) { progress = append(progress, p) }})
	require.NoError(t, err)
	sent := counter.Commands()
	mongotest.Detail(t, "Check of %d collections: %s, %d commands: %v", len(rep.Collections), time.Since(start), len(sent), sent)
	for _, c := range sent {
		require.Contains(t, readCommands, c, "a check only reads")
	}
	require.Len(t, progress, 7)
	require.Equal(t, doctor.Progress{Collection: "readings", Done: 7, Total: 7}, progress[6])

	arr := has(rep, doctor.RuleUnboundedArray, "products")
	require.Len(t, arr, 1)
	require.Equal(t, "reviews", arr[0].Field)
	maxLen, _ := arr[0].Evidence.Get("maxLength")
	require.EqualValues(t, 1500, maxLen)

	bloated := has(rep, doctor.RuleBloatedDocument, "files")
	require.Len(t, bloated, 1)
	require.Equal(t, "content", bloated[0].Field)
	maxBytes, _ := bloated[0].Evidence.Get("maxBytes")
	require.Greater(t, maxBytes.(int64), int64(3_000_000))

	redundant := has(rep, doctor.RuleRedundantIndex, "orders")
	require.Len(t, redundant, 1)
	require.Equal(t, "customerId_1", redundant[0].Index)

	dyn := has(rep, doctor.RuleDynamicFieldNames, "items")
	require.Len(t, dyn, 1)
	require.Equal(t, "attr_*", dyn[0].Field)
	n, _ := dyn[0].Evidence.Get("distinctKeys")
	require.Equal(t, len(doctortest.Attributes), n)

	mk := has(rep, doctor.RuleMultikeyCompound, "catalog")
	require.Len(t, mk, 1)
	require.Equal(t, "tags_1_sizes_1", mk[0].Index)

	require.Len(t, rep.Findings, 5, "nothing else on the collections without anti-patterns: %v", rep.Findings)
	require.True(t, slices.ContainsFunc(rep.Skipped, func(s doctor.Skip) bool { return s.Rule == doctor.RuleUnusedIndex }),
		"unused-index needs $indexStats and a week of counters: skipped here, with the reason: %v", rep.Skipped)
	for _, c := range rep.Collections {
		require.Equal(t, doctor.SampleAll, c.Sample.Method, "%s: every collection is under the sample size", c.Name)
		require.Equal(t, int(c.Documents), c.Sample.Documents, c.Name)
	}
}

func TestCheckCleanDatabaseHasNoFindings(t *testing.T) {
	db := seeded(t, doctortest.Clean)
	rep, err := doctor.Check(context.Background(), db, doctor.Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Findings, "an index over the fields of one array, {items.sku: 1, items.qty: 1}, is valid")
	require.Len(t, rep.Collections, 3)
	for _, s := range rep.Skipped {
		require.Equal(t, doctor.RuleUnusedIndex, s.Rule, "only rules the server or the data cannot support are skipped: %v", s)
	}
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	require.Contains(t, string(b), `"findings":[]`)
}

func TestCheckQueryShapesPipelinesAndShardKeys(t *testing.T) {
	ctx := context.Background()
	db := seeded(t, doctortest.AntiPatterns)
	pipeline, err := doctor.ParsePipeline([]byte(`{"collection": "orders", "pipeline": [
		{"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "code", "as": "customer"}},
		{"$unwind": "$customer"}, {"$match": {"status": "paid"}}, {"$project": {"total": 1, "customer.name": 1}}]}`))
	require.NoError(t, err)
	rep, err := doctor.Check(ctx, db, doctor.Options{
		Collections: []string{"orders", "products"},
		Queries: []doctor.Query{
			mustQuery(t, `{"collection": "orders", "filter": {"status": "paid"}, "sort": {"createdAt": -1}, "name": "paid by date"}`),
			mustQuery(t, `{"collection": "orders", "filter": {"customerId": "c1", "createdAt": {"$gte": {"$date": "2026-03-02T00:00:00Z"}}}, "name": "customer history"}`),
			mustQuery(t, `{"collection": "orders", "filter": {"total": {"$gt": 100}}, "name": "big orders"}`),
			mustQuery(t, `{"collection": "products", "filter": {"name": {"$regex": "^kettle", "$options": "i"}}, "name": "search"}`),
			mustQuery(t, `{"collection": "customers", "filter": {"code": {"$regex": "^C1", "$options": "i"}}, "name": "code search"}`),
			mustQuery(t, `{"collection": "customers", "filter": {"name": "customer 1", "code": {"$regex": "^C1", "$options": "i"}}, "name": "named code search"}`),
		},
		Pipelines: []doctor.Pipeline{pipeline},
		ShardKeys: []doctor.ShardKey{
			{Collection: "orders", Key: bson.D{{Key: "_id", Value: 1}}},
			{Collection: "orders", Key: bson.D{{Key: "status", Value: 1}}},
			{Collection: "orders", Key: bson.D{{Key: "customerId", Value: "hashed"}}},
		},
	})
	require.NoError(t, err)
	byQuery := func(rule, query string) []doctor.Finding {
		var out []doctor.Finding
		for _, f := range rep.Findings {
			if f.Rule == rule && f.Query == query {
				out = append(out, f)
			}
		}
		return out
	}

	esr := byQuery(doctor.RuleESROrder, "paid by date")
	require.Len(t, esr, 1, "%v", rep.Findings)
	require.Equal(t, "createdAt_1_status_1", esr[0].Index)
	ideal, _ := esr[0].Evidence.Get("esrIndex")
	require.Equal(t, "{status: 1, createdAt: -1}", ideal)

	big := byQuery(doctor.RuleUnindexedQuery, "big orders")
	require.Len(t, big, 1)
	require.Equal(t, doctor.Warning, big[0].Severity)

	require.Len(t, byQuery(doctor.RuleCaseInsensitiveRegex, "search"), 1)
	// An index on code would not serve a case-insensitive $regex on it:
	// one remedy, the regex rule's, not also "create index {code: 1}"
	// (issue 22).
	for _, query := range []string{"search", "code search"} {
		require.Len(t, byQuery(doctor.RuleCaseInsensitiveRegex, query), 1, query)
		require.Empty(t, byQuery(doctor.RuleUnindexedQuery, query), query)
		require.Empty(t, byQuery(doctor.RuleESROrder, query), query)
	}
	named := byQuery(doctor.RuleUnindexedQuery, "named code search")
	require.Len(t, named, 1, "name needs an index, code a case-insensitive one")
	require.Equal(t, "create index {name: 1} (Equality, Sort, Range order; patterns.ESRKey builds such keys)", named[0].Remedy)
	require.Equal(t, "name", named[0].Field)
	require.Len(t, byQuery(doctor.RuleCaseInsensitiveRegex, "named code search"), 1)

	// The index serves "customer history" in ESR order. Whether that is a
	// finding depends on what the server's explain says: on MongoDB an
	// IXSCAN (no finding); a plan that scans (PostgreSQL's Seq Scan, which
	// FerretDB 2.x picks for a collection this small), a warning; a plan
	// that cannot say (FerretDB 1.x's SQLite plan), an info finding that
	// says so; an explain the server refuses, a skip.
	history := byQuery(doctor.RuleUnindexedQuery, "customer history")
	if len(history) > 0 {
		plan, _ := history[0].Evidence.Get("plan")
		mongotest.Detail(t, "the server's plan for a served shape: %s", plan)
		if history[0].Severity == doctor.Info {
			require.True(t, strings.HasPrefix(history[0].Message, "plan unreadable: "), history[0].Message)
		} else {
			scan, _ := history[0].Evidence.Get("collectionScan")
			require.Equal(t, true, scan, "a served shape is a warning only when the plan scans: %v", history[0])
		}
	}

	for _, rule := range []string{doctor.RulePipelineLookupUnindexed, doctor.RulePipelineMatchLate, doctor.RulePipelineLookupExtref} {
		require.Len(t, byQuery(rule, pipeline.String()), 1, rule)
	}

	require.Len(t, rep.ShardKeys, 3)
	id := rep.ShardKeys[0]
	require.Equal(t, "monotonic", id.Monotonicity, id.Why)
	require.Len(t, byQuery(doctor.RuleShardKeyMonotonic, `orders {"_id":1}`), 1)
	status := rep.ShardKeys[1]
	require.Equal(t, 3, status.Distinct)
	require.InDelta(t, 0.7, status.TopShare, 0.01)
	require.Equal(t, `"paid"`, status.MostCommon[0].Value)
	require.Len(t, byQuery(doctor.RuleShardKeyCardinality, `orders {"status":1}`), 1)
	require.Len(t, byQuery(doctor.RuleShardKeyFrequency, `orders {"status":1}`), 1)
	require.Empty(t, byQuery(doctor.RuleShardKeyMonotonic, `orders {"status":1}`))
	hashed := rep.ShardKeys[2]
	require.Equal(t, "not monotonic", hashed.Monotonicity)
	require.Empty(t, byQuery(doctor.RuleShardKeyFrequency, `orders {"customerId":"hashed"}`), "ten customers of 10% each: few values, evenly spread")
	targets := map[string]string{}
	for _, q := range hashed.Queries {
		targets[q.Query] = q.Targeting
	}
	require.Equal(t, map[string]string{"paid by date": doctor.TargetScatterGather, "customer history": doctor.TargetOneShard, "big orders": doctor.TargetScatterGather}, targets)
	require.Len(t, byQuery(doctor.RuleShardKeyScatterGather, "paid by date"), 2, "under _id and hashed customerId; under status it goes to one shard")
}

func TestThresholdsAreOptions(t *testing.T) {
	db := seeded(t, doctortest.AntiPatterns)
	rep, err := doctor.Check(context.Background(), db, doctor.Options{
		Thresholds: doctor.Thresholds{Indexes: 3, Collections: 5, TimeSeriesDocuments: 200, ArrayLength: 1600},
		Disable:    []string{doctor.RuleBloatedDocument},
	})
	require.NoError(t, err)
	require.Len(t, has(rep, doctor.RuleTooManyIndexes, "orders"), 1, "4 indexes > 3")
	require.Len(t, has(rep, doctor.RuleTooManyCollections, ""), 1, "7 collections > 5")
	ts := has(rep, doctor.RuleTimeSeriesDocuments, "readings")
	require.Len(t, ts, 1)
	require.Equal(t, "ts", ts[0].Field)
	require.Empty(t, has(rep, doctor.RuleUnboundedArray, "products"), "1,500 is under 1,600")
	require.Empty(t, has(rep, doctor.RuleBloatedDocument, "files"), "disabled")
}

func TestSampleIsBounded(t *testing.T) {
	ctx := context.Background()
	db := seeded(t, doctortest.AntiPatterns)
	rep, err := doctor.Check(ctx, db, doctor.Options{SampleSize: 50, Collections: []string{"readings"}})
	require.NoError(t, err)
	require.Len(t, rep.Collections, 1)
	c := rep.Collections[0]
	require.EqualValues(t, 300, c.Documents)
	require.Equal(t, 50, c.Sample.Documents)
	require.Contains(t, []doctor.SampleMethod{doctor.SampleRandom, doctor.SampleFirst}, c.Sample.Method)
	if c.Sample.Method == doctor.SampleFirst {
		require.True(t, slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "$sample") }),
			"a sample that is not random says so: %v", rep.Notes)
	}

	rep, err = doctor.Check(ctx, db, doctor.Options{SampleSize: 50, SampleBytes: 1000, Collections: []string{"readings"}})
	require.NoError(t, err)
	require.True(t, rep.Collections[0].Sample.Truncated)
	require.Less(t, rep.Collections[0].Sample.Bytes, int64(1100))

	rep, err = doctor.Check(ctx, db, doctor.Options{SampleSize: 50, FullScan: true, Collections: []string{"readings"}})
	require.NoError(t, err)
	require.Equal(t, doctor.SampleFullScan, rep.Collections[0].Sample.Method)
	require.Equal(t, 300, rep.Collections[0].Sample.Documents)

	_, err = doctor.Check(ctx, db, doctor.Options{Collections: []string{"nowhere"}})
	require.ErrorIs(t, err, patterns.ErrNotFound)
	_, err = doctor.Check(ctx, db, doctor.Options{SampleSize: -1})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

// review and product are the subset repository's types, to check its
// declared indexes.
type review struct {
	ID        string    `bson:"_id"`
	ProductID string    `bson:"productId,omitempty"`
	At        time.Time `bson:"at"`
}

type product struct {
	ID      string   `bson:"_id"`
	Reviews []review `bson:"reviews,omitempty"`
}

func TestCheckIndexesOfARepository(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	repo, err := subset.New[product, review](db, subset.Config{
		Parents: "products", Field: "reviews", Items: "reviews", ParentField: "productId",
		SortField: "at", Descending: true, Cap: 3,
	})
	require.NoError(t, err)
	declared := repo.Indexes()
	require.NotEmpty(t, declared)

	rep, err := doctor.CheckIndexes(ctx, declared...)
	require.NoError(t, err)
	require.Len(t, rep.Findings, len(declared), "every declared index is missing before EnsureIndexes")
	for _, f := range rep.Findings {
		require.Equal(t, doctor.RuleMissingIndex, f.Rule)
		state, _ := f.Evidence.Get("found")
		require.Equal(t, "collection absent", state)
	}

	require.NoError(t, patterns.EnsureIndexes(ctx, declared...))
	rep, err = doctor.CheckIndexes(ctx, declared...)
	require.NoError(t, err)
	require.Empty(t, rep.Findings)

	// The same key with other options is not the declared index.
	coll := db.Collection("accounts")
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}})
	require.NoError(t, err)
	want := patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1.0}}, Options: options.Index().SetUnique(true)}}
	rep, err = doctor.CheckIndexes(ctx, want)
	require.NoError(t, err)
	require.Len(t, rep.Findings, 1)
	require.Equal(t, doctor.Critical, rep.Findings[0].Severity, "a missing unique index lets duplicates in")
	state, _ := rep.Findings[0].Evidence.Get("found")
	require.Equal(t, "differs: unique: declared true, found false", state)

	// Check reports them too.
	rep, err = doctor.Check(ctx, db, doctor.Options{Indexes: append(declared, want)})
	require.NoError(t, err)
	require.Len(t, has(rep, doctor.RuleMissingIndex, "accounts"), 1)

	_, err = doctor.CheckIndexes(ctx, patterns.Index{Model: mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

func TestLintPipelineReadsForeignIndexes(t *testing.T) {
	ctx := context.Background()
	db := seeded(t, doctortest.AntiPatterns)
	p := doctor.Pipeline{Collection: "orders", Stages: []bson.D{
		{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "customers"}, {Key: "localField", Value: "customerId"}, {Key: "foreignField", Value: "code"}, {Key: "as", Value: "c"}}}},
	}}
	rep, err := doctor.LintPipeline(ctx, db, p, doctor.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Findings, 1)
	require.Equal(t, doctor.RulePipelineLookupUnindexed, rep.Findings[0].Rule)

	_, err = db.Collection("customers").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "code", Value: 1}}})
	require.NoError(t, err)
	rep, err = doctor.LintPipeline(ctx, db, p, doctor.Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Findings)
}

func TestAnalyzeShardKey(t *testing.T) {
	ctx := context.Background()
	db := seeded(t, doctortest.AntiPatterns)
	rep, err := doctor.AnalyzeShardKey(ctx, db, doctor.ShardKey{Collection: "orders", Key: bson.D{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: 1}}},
		doctor.Options{Queries: []doctor.Query{mustQuery(t, `{"collection": "orders", "filter": {"customerId": "c3"}, "sort": {"createdAt": -1}}`)}})
	require.NoError(t, err)
	require.Len(t, rep.ShardKeys, 1)
	a := rep.ShardKeys[0]
	require.Equal(t, doctortest.Orders, a.Documents)
	require.Equal(t, doctortest.Orders, a.Distinct, "customer and time together are unique")
	require.Len(t, a.MostCommon, 5)
	require.Equal(t, 1, a.MostCommon[0].Count)
	require.Equal(t, "not monotonic", a.Monotonicity, "customers cycle: %s", a.Why)
	require.Equal(t, []doctor.QueryTargeting{{Query: `orders {"customerId":"c3"} sort {"createdAt":-1}`, Targeting: doctor.TargetSomeShards,
		Why: "equality on a prefix of the key (customerId); the chunks of that prefix may span shards"}}, a.Queries)
	// A good key, but no index supports it ({customerId: 1, createdAt: -1}
	// does not: the values differ), so shardCollection would refuse it.
	require.Len(t, rep.Findings, 1, "%v", rep.Findings)
	f := rep.Findings[0]
	require.Equal(t, doctor.RuleShardKeyIndex, f.Rule)
	require.Equal(t, doctor.Warning, f.Severity)
	require.Contains(t, f.Remedy, `create the index {"customerId":1,"createdAt":1} on orders`)
	_, err = db.Collection("orders").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: 1}, {Key: "status", Value: 1}}})
	require.NoError(t, err)
	rep, err = doctor.AnalyzeShardKey(ctx, db, doctor.ShardKey{Collection: "orders", Key: bson.D{{Key: "customerId", Value: 1}, {Key: "createdAt", Value: 1}}}, doctor.Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Findings, "a compound index that starts with the key supports it: %v", rep.Findings)

	// A collection that does not exist, or is empty, cannot be measured,
	// and the report says which (issue 22).
	require.NoError(t, db.CreateCollection(ctx, "empty"))
	for coll, why := range map[string]string{"nowhere": "the collection does not exist", "empty": "the collection is empty"} {
		rep, err = doctor.AnalyzeShardKey(ctx, db, doctor.ShardKey{Collection: coll, Key: bson.D{{Key: "a", Value: 1}}}, doctor.Options{})
		require.NoError(t, err)
		require.Len(t, rep.Skipped, 3, "%s cannot be measured: %v", coll, rep.Skipped)
		for _, s := range rep.Skipped {
			require.Equal(t, coll+` {"a":1}: `+why, s.Reason)
		}
		require.Equal(t, why, rep.ShardKeys[0].Why)
		var text strings.Builder
		require.NoError(t, rep.WriteText(&text))
		require.Contains(t, text.String(), "\nshard key "+coll+` {"a":1}: nothing to measure: `+why+"\n")
		require.NotContains(t, text.String(), "most frequent")
	}

	_, err = doctor.AnalyzeShardKey(ctx, db, doctor.ShardKey{Collection: "orders", Key: bson.D{{Key: "a", Value: -1}}}, doctor.Options{})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

func TestCheckRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	_, err := doctor.Check(ctx, nil, doctor.Options{})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.EqualError(t, err, fmt.Sprintf("doctor: Check: nil database: %v", patterns.ErrInvalid))
	_, err = doctor.Check(ctx, mongotest.DB(t), doctor.Options{Disable: []string{"nope"}})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

// TestCheckServedQueriesOnAnyPlan: with {status: 1, createdAt: -1} in
// place, neither a lookup by _id nor the query the index serves is a
// warning unless the server's plan says it scans. A plan that cannot say
// (FerretDB 1.x's SQLite plan reads SCAN for every filter) gives an info
// finding that says so, never a claim of a scan (issue 22).
func TestCheckServedQueriesOnAnyPlan(t *testing.T) {
	ctx := context.Background()
	db := seeded(t, doctortest.Clean)
	var order struct {
		ID bson.ObjectID `bson:"_id"`
	}
	require.NoError(t, db.Collection("orders").FindOne(ctx, bson.D{}).Decode(&order))
	rep, err := doctor.Check(ctx, db, doctor.Options{Collections: []string{"orders"}, Queries: []doctor.Query{
		{Collection: "orders", Filter: bson.D{{Key: "_id", Value: order.ID}}, Name: "by id"},
		{Collection: "orders", Filter: bson.D{{Key: "status", Value: "paid"}}, Sort: bson.D{{Key: "createdAt", Value: -1}}, Name: "paid by date"},
	}})
	require.NoError(t, err)
	for _, f := range rep.Findings {
		plan, _ := f.Evidence.Get("plan")
		scan, claimed := f.Evidence.Get("collectionScan")
		mongotest.Detail(t, "%s %s [%s]: %s; plan: %v", f.Severity, f.Rule, f.Query, f.Message, plan)
		require.Equal(t, doctor.RuleUnindexedQuery, f.Rule, "%v", f)
		if strings.HasPrefix(fmt.Sprint(plan), "unreadable: ") {
			require.Equal(t, doctor.Info, f.Severity, "%v", f)
			require.True(t, strings.HasPrefix(f.Message, "plan unreadable: "), f.Message)
			require.False(t, claimed, "an unreadable plan claims no scan: %v", f)
			continue
		}
		require.Equal(t, "paid by date", f.Query, "a lookup by _id is served by its index on every server: %v", f)
		require.Equal(t, true, scan, "a served shape is a warning only when a readable plan scans: %v", f)
	}
}

// TestCheckIndexesTellsScaledDirectionsApart: an existing {n: 2} is not a
// declared {n: 1} (createIndexes builds {n: 1} beside it: another key
// pattern), while {n: 1.0} is (CheckIndexes' godoc: directions compared by
// value). FerretDB 1.24 refuses the index {n: 2}: the test skips there.
func TestCheckIndexesTellsScaledDirectionsApart(t *testing.T) {
	ctx := context.Background()
	coll := mongotest.DB(t).Collection("scaled")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 2}}}); err != nil {
		t.Skipf("the server refuses the index {n: 2}: %v", err)
	}
	for _, tc := range []struct {
		dir     any
		missing bool
	}{{1, true}, {1.0, true}, {2, false}, {int64(2), false}} {
		rep, err := doctor.CheckIndexes(ctx, patterns.Index{Collection: coll, Model: mongo.IndexModel{Keys: bson.D{{Key: "n", Value: tc.dir}}}})
		require.NoError(t, err)
		require.Equal(t, tc.missing, len(has(rep, doctor.RuleMissingIndex, "scaled")) == 1, "declared {n: %v} against the existing {n: 2}: %v", tc.dir, rep.Findings)
	}
}
