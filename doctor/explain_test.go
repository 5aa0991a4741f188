package doctor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func ext(t *testing.T, s string) bson.Raw {
	t.Helper()
	var raw bson.Raw
	require.NoError(t, bson.UnmarshalExtJSON([]byte(s), false, &raw))
	return raw
}

func TestReadPlan(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		want        planReading
	}{
		{"MongoDB collection scan", `{"queryPlanner": {"namespace": "shop.orders", "winningPlan": {"stage": "COLLSCAN", "filter": {"status": {"$eq": "paid"}}, "direction": "forward"}, "rejectedPlans": []}, "ok": 1}`,
			planReading{Readable: true, Form: "winningPlan", Scan: true, Text: "COLLSCAN"}},
		{"MongoDB index scan", `{"queryPlanner": {"winningPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "keyPattern": {"status": 1}, "indexName": "status_1", "direction": "forward"}}}}`,
			planReading{Readable: true, Form: "winningPlan", Indexes: []string{"status_1"}, Text: "FETCH > IXSCAN status_1"}},
		{"MongoDB blocking sort over a scan", `{"queryPlanner": {"winningPlan": {"stage": "SORT", "inputStage": {"stage": "COLLSCAN"}}}}`,
			planReading{Readable: true, Form: "winningPlan", Scan: true, Text: "SORT > COLLSCAN"}},
		{"MongoDB slot-based engine", `{"queryPlanner": {"winningPlan": {"queryPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "indexName": "a_1"}}, "slotBasedPlan": {"slots": "..."}}}}`,
			planReading{Readable: true, Form: "winningPlan", Indexes: []string{"a_1"}, Text: "FETCH > IXSCAN a_1"}},
		{"MongoDB $or with two index scans", `{"queryPlanner": {"winningPlan": {"stage": "SUBPLAN", "inputStage": {"stage": "FETCH", "inputStage": {"stage": "OR", "inputStages": [{"stage": "IXSCAN", "indexName": "a_1"}, {"stage": "IXSCAN", "indexName": "b_1"}]}}}}}`,
			planReading{Readable: true, Form: "winningPlan", Indexes: []string{"a_1", "b_1"}, Text: "SUBPLAN > FETCH > OR > IXSCAN a_1 > IXSCAN b_1"}},
		{"MongoDB _id lookups", `{"queryPlanner": {"winningPlan": {"stage": "EXPRESS_IXSCAN", "indexName": "_id_"}}}`,
			planReading{Readable: true, Form: "winningPlan", Indexes: []string{"_id_"}, Text: "EXPRESS_IXSCAN _id_"}},
		{"MongoDB sharded", `{"queryPlanner": {"winningPlan": {"stage": "SHARD_MERGE", "shards": [{"shardName": "s0", "winningPlan": {"stage": "SHARDING_FILTER", "inputStage": {"stage": "COLLSCAN"}}}, {"shardName": "s1", "winningPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "indexName": "a_1"}}}]}}}`,
			planReading{Readable: true, Form: "winningPlan", Scan: true, Indexes: []string{"a_1"}, Text: "SHARDING_FILTER > COLLSCAN > FETCH > IXSCAN a_1 > SHARD_MERGE"}},
		{"PostgreSQL bitmap index scan", `{"queryPlanner": {"Plan": {"Node Type": "Bitmap Heap Scan", "Relation Name": "orders", "Plans": [{"Node Type": "Bitmap Index Scan", "Index Name": "status_1", "Parent Relationship": "Outer"}]}}, "ok": 1}`,
			planReading{Readable: true, Form: "PostgreSQL plan", Indexes: []string{"status_1"}, Text: "Bitmap Heap Scan > Bitmap Index Scan status_1"}},
		{"PostgreSQL sequential scan", `{"queryPlanner": {"Plan": [{"Plan": {"Node Type": "Seq Scan", "Relation Name": "documents_12"}}]}}`,
			planReading{Readable: true, Form: "PostgreSQL plan", Scan: true, Text: "Seq Scan"}},
		{"SQLite scan (FerretDB 1.24, as measured, for every filter, _id lookups included): it cannot say", `{"queryPlanner": {"Plan": ["id=2 parent=0 notused=0 detail=SCAN c_e60c2c52"]}, "explainVersion": "1", "filterPushdown": false}`,
			planReading{Form: "SQLite plan", Text: `SQLite's plan "SCAN c_e60c2c52" names no index, and that form reads SCAN for a lookup by _id too: it cannot say whether an index serves the query`}},
		{"SQLite search", `{"queryPlanner": {"Plan": ["id=3 parent=0 notused=0 detail=SEARCH c USING INDEX c_a_1 (a=?)"]}}`,
			planReading{Readable: true, Form: "SQLite plan", Indexes: []string{"c_a_1"}, Text: "SEARCH c USING INDEX c_a_1 (a=?)"}},
		{"SQLite full index scan", `{"queryPlanner": {"Plan": ["detail=SCAN c USING COVERING INDEX c_a_1"]}}`,
			planReading{Readable: true, Form: "SQLite plan", Scan: true, Indexes: []string{"c_a_1"}, Text: "SCAN c USING COVERING INDEX c_a_1"}},
		{"an empty queryPlanner (FerretDB 1.24, missing collection)", `{"queryPlanner": {}, "ok": 1}`,
			planReading{Text: "queryPlanner holds no plan this package can read (keys: )"}},
		{"no queryPlanner", `{"ok": 1}`, planReading{Text: "the reply has no queryPlanner"}},
		{"another form", `{"queryPlanner": {"plan": "full table scan", "cost": 12}}`,
			planReading{Text: "queryPlanner holds no plan this package can read (keys: plan, cost)"}},
	} {
		require.Equal(t, tc.want, readPlan(ext(t, tc.reply)), tc.name)
	}
}
