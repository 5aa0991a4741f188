package doctor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func stages(t *testing.T, js string) []bson.D {
	t.Helper()
	p, err := ParsePipeline([]byte(`{"collection": "orders", "pipeline": ` + js + `}`))
	require.NoError(t, err, js)
	return p.Stages
}

func TestLintPipelineRules(t *testing.T) {
	indexes := map[string][]indexSpec{
		"customers": {{Name: "_id_", Key: key("_id", 1)}, {Name: "code_1", Key: key("code", 1)}},
		"products":  {{Name: "_id_", Key: key("_id", 1)}, {Name: "sku_1", Key: key("sku", 1), Sparse: true}},
	}
	lookup := func(coll string) ([]indexSpec, bool, error) {
		specs, ok := indexes[coll]
		return specs, ok, nil
	}
	s, err := Options{}.validate("test")
	require.NoError(t, err)
	type hit struct {
		rule string
		sev  Severity
		to   int // canMoveTo, or the stage of a lookup rule
	}
	for _, tc := range []struct {
		name, js string
		want     []hit
	}{
		{"$match first: nothing", `[{"$match": {"status": "paid"}}, {"$sort": {"at": -1}}]`, nil},
		{"$match after $sort moves first", `[{"$sort": {"at": -1}}, {"$match": {"status": "paid"}}]`,
			[]hit{{RulePipelineMatchLate, Warning, 0}}},
		{"$match on a field the $unwind writes stays", `[{"$unwind": "$items"}, {"$match": {"items.sku": "x"}}]`, nil},
		{"$match past an $unwind of another field", `[{"$unwind": "$items"}, {"$match": {"status": "paid"}}]`,
			[]hit{{RulePipelineMatchLate, Warning, 0}}},
		{"$match on a computed field stays", `[{"$addFields": {"n": {"$size": "$items"}}}, {"$match": {"n": {"$gt": 2}}}]`, nil},
		{"$match never passes $limit", `[{"$limit": 10}, {"$match": {"status": "paid"}}]`, nil},
		{"$match passes $project keeping its field, not $group",
			`[{"$group": {"_id": "$status", "n": {"$sum": 1}}}, {"$project": {"_id": 1, "n": 1}}, {"$match": {"n": {"$gt": 1}}}]`,
			[]hit{{RulePipelineMatchLate, Info, 1}}},
		// The documented limit (see RulePipelineMatchLate): a $match on the
		// group key could go first as {status: "paid"}, but the lint never
		// moves a $match past a $group.
		{"$match on the group key after $group is not reported", `[{"$sort": {"at": 1}}, {"$group": {"_id": "$status", "n": {"$sum": 1}}}, {"$match": {"_id": "paid"}}]`, nil},
		{"$match on a field an inclusion $project drops stays", `[{"$project": {"total": 1}}, {"$match": {"status": "paid"}}]`, nil},
		{"$match on $$ROOT stays; the $project can precede the $sort", `[{"$sort": {"a": 1}}, {"$project": {"a": 1}}, {"$match": {"$expr": {"$gt": ["$$ROOT.a", 1]}}}]`,
			[]hit{{RulePipelineProjectLate, Info, 0}}},
		{"late $unset passes $lookup and $unwind",
			`[{"$match": {"status": "paid"}}, {"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "code", "as": "c"}}, {"$unwind": "$c"}, {"$unset": ["notes", "history"]}]`,
			[]hit{{RulePipelineProjectLate, Info, 1}}},
		{"late $unset of a field the $sort uses stays",
			`[{"$sort": {"notes": 1}}, {"$unset": "notes"}]`, nil},
		{"late inclusion $project that keeps what the stages use",
			`[{"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "code", "as": "c"}}, {"$project": {"customerId": 1, "c": 1, "total": 1}}]`,
			[]hit{{RulePipelineProjectLate, Info, 0}}},
		{"late inclusion $project that drops the lookup's result stays",
			`[{"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "code", "as": "c"}}, {"$project": {"customerId": 1, "total": 1}}]`, nil},
		{"$lookup on an unindexed foreign field",
			`[{"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "email", "as": "c"}}]`,
			[]hit{{RulePipelineLookupUnindexed, Warning, 0}}},
		{"$lookup on a sparse index", `[{"$lookup": {"from": "products", "localField": "sku", "foreignField": "sku", "as": "p"}}]`,
			[]hit{{RulePipelineLookupUnindexed, Warning, 0}}},
		{"$lookup on a missing collection", `[{"$lookup": {"from": "nowhere", "localField": "a", "foreignField": "b", "as": "p"}}]`,
			[]hit{{RulePipelineLookupUnindexed, Warning, 0}}},
		{"$lookup with let and pipeline on an unindexed field",
			`[{"$lookup": {"from": "customers", "let": {"cid": "$customerId"}, "pipeline": [{"$match": {"$expr": {"$and": [{"$eq": ["$email", "$$cid"]}]}}}], "as": "c"}}]`,
			[]hit{{RulePipelineLookupUnindexed, Warning, 0}}},
		{"$lookup with let and pipeline on an indexed field",
			`[{"$lookup": {"from": "customers", "let": {"cid": "$customerId"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$$cid", "$code"]}}}], "as": "c"}}]`, nil},
		{"$lookup read for two fields",
			`[{"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "code", "as": "c"}}, {"$unwind": "$c"}, {"$addFields": {"name": "$c.name", "city": "$c.address.city"}}]`,
			[]hit{{RulePipelineLookupExtref, Info, 0}}},
		{"case-insensitive $regex in a $match", `[{"$match": {"name": {"$regex": "kettle", "$options": "i"}}}]`,
			[]hit{{RuleCaseInsensitiveRegex, Warning, 0}}},
		{"$lookup read whole",
			`[{"$lookup": {"from": "customers", "localField": "customerId", "foreignField": "code", "as": "c"}}, {"$addFields": {"n": {"$size": "$c"}}}]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Pipeline{Collection: "orders", Stages: stages(t, tc.js)}
			fs, err := lintPipeline(p, s, lookup)
			require.NoError(t, err)
			var got []hit
			for _, f := range fs {
				to, ok := f.Evidence.Get("canMoveTo")
				if !ok {
					to, _ = f.Evidence.Get("stage")
				}
				got = append(got, hit{f.Rule, f.Severity, to.(int)})
				require.Equal(t, p.String(), f.Query)
				require.NotEmpty(t, f.Remedy)
			}
			require.Equal(t, tc.want, got)
		})
	}
	for _, r := range Rules {
		if r.ID == RulePipelineMatchLate {
			require.Contains(t, r.About, "never moved past a $group, even on the group key", "the limit is documented where the rules are listed")
		}
	}
}

func TestParsePipeline(t *testing.T) {
	p, err := ParsePipeline([]byte(`{"collection": "orders", "pipeline": [{"$match": {"a": 1}}, {"$limit": 5}]}`))
	require.NoError(t, err)
	require.Equal(t, "orders [$match $limit]", p.String())
	for _, bad := range []string{
		`{"collection": "orders"}`, `{"collection": "orders", "pipeline": []}`,
		`{"collection": "orders", "pipeline": {"$match": {}}}`, `{"collection": "orders", "pipeline": [1]}`,
		`{"collection": "orders", "pipeline": [{"$match": {}, "$limit": 1}]}`, `{"collection": "orders", "pipeline": [{"match": {}}]}`,
		`{"collection": "orders", "pipeline": [{"$limit": 1}], "allowDiskUse": true}`,
	} {
		_, err := ParsePipeline([]byte(bad))
		require.ErrorIs(t, err, patterns.ErrInvalid, bad)
	}
}

func FuzzParsePipeline(f *testing.F) {
	f.Add(`{"collection": "orders", "pipeline": [{"$sort": {"a": 1}}, {"$match": {"b": 2}}, {"$unset": "c"}]}`)
	f.Add(`{"collection": "orders", "pipeline": [{"$lookup": {"from": "c", "let": {"v": "$x"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$y", "$$v"]}}}], "as": "j"}}, {"$project": {"j.name": 1}}]}`)
	s, _ := Options{}.validate("fuzz")
	f.Fuzz(func(t *testing.T, js string) {
		p, err := ParsePipeline([]byte(js))
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			return
		}
		fs, err := lintPipeline(p, s, func(string) ([]indexSpec, bool, error) { return nil, true, nil })
		require.NoError(t, err)
		for _, f := range fs {
			require.True(t, knownRule(f.Rule))
		}
	})
}
