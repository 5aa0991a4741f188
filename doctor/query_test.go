package doctor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func d(kv ...any) bson.D {
	out := bson.D{}
	for i := 0; i < len(kv); i += 2 {
		out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return out
}

func TestShapeOfClassifiesByESR(t *testing.T) {
	many := bson.A{}
	for i := range inRangeSize {
		many = append(many, i)
	}
	for _, tc := range []struct {
		name         string
		filter, sort bson.D
		eq, rng      []string
		sorted       []sortField
		esr          string
		regexI       int
		opaque       []string
	}{
		{name: "equality, sort, range",
			filter: d("status", "paid", "total", d("$gt", 100)), sort: d("createdAt", -1),
			eq: []string{"status"}, rng: []string{"total"}, sorted: []sortField{{"createdAt", -1}},
			esr: "{status: 1, createdAt: -1, total: 1}"},
		{name: "$eq and small $in are equalities",
			filter: d("a", d("$eq", 1), "b", d("$in", bson.A{1, 2})), sort: d("c", 1),
			eq: []string{"a", "b"}, sorted: []sortField{{"c", 1}}, esr: "{a: 1, b: 1, c: 1}"},
		{name: "a large $in with a sort is a range",
			filter: d("b", d("$in", many)), sort: d("c", 1),
			rng: []string{"b"}, sorted: []sortField{{"c", 1}}, esr: "{c: 1, b: 1}"},
		{name: "a large $in without a sort is an equality",
			filter: d("b", d("$in", many)), eq: []string{"b"}, esr: "{b: 1}"},
		{name: "$ne, $nin, $exists, $regex are ranges",
			filter: d("a", d("$ne", 1), "b", d("$nin", bson.A{1}), "c", d("$exists", true), "e", bson.Regex{Pattern: "^x"}),
			rng:    []string{"a", "b", "c", "e"}, esr: "{a: 1, b: 1, c: 1, e: 1}"},
		{name: "an embedded document matched whole is an equality",
			filter: d("address", d("city", "Paris")), eq: []string{"address"}, esr: "{address: 1}"},
		{name: "a sorted equality field sorts for free",
			filter: d("a", 1), sort: d("a", -1, "b", 1),
			eq: []string{"a"}, sorted: []sortField{{"b", 1}}, esr: "{a: 1, b: 1}"},
		{name: "a ranged and sorted field is a sort field",
			filter: d("createdAt", d("$gte", 1)), sort: d("createdAt", -1),
			sorted: []sortField{{"createdAt", -1}}, esr: "{createdAt: -1}"},
		{name: "$and is looked into, $or is not",
			filter: d("$and", bson.A{d("a", 1), d("b", d("$lt", 2))}, "$or", bson.A{d("x", 1)}),
			eq:     []string{"a"}, rng: []string{"b"}, esr: "{a: 1, b: 1}", opaque: []string{"$or"}},
		{name: "case-insensitive regexes",
			filter: d("name", bson.Regex{Pattern: "^k", Options: "i"}, "sku", d("$regex", "x", "$options", "si")),
			rng:    []string{"name", "sku"}, esr: "{name: 1, sku: 1}", regexI: 2},
		{name: "directions by value", filter: d(), sort: d("a", int64(-1), "b", 1.0),
			sorted: []sortField{{"a", -1}, {"b", 1}}, esr: "{a: -1, b: 1}"},
		{name: "text score sort is not analysed", filter: d("a", 1), sort: d("score", d("$meta", "textScore")),
			eq: []string{"a"}, esr: "{a: 1}", opaque: []string{"sort $meta"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh, err := shapeOf(tc.filter, tc.sort)
			require.NoError(t, err)
			require.Equal(t, tc.eq, sh.eq)
			require.Equal(t, tc.rng, sh.rng)
			require.Equal(t, tc.sorted, sh.sort)
			require.Equal(t, tc.esr, keyString(sh.esrKey()))
			require.Len(t, sh.regexI, tc.regexI)
			require.Equal(t, tc.opaque, sh.opaque)
		})
	}
	for _, bad := range []bson.D{d("a", 0), d("a", "up"), d("$x", 1), d("a", 2)} {
		_, err := shapeOf(nil, bad)
		require.ErrorIs(t, err, patterns.ErrInvalid, "sort %v", bad)
	}
	_, err := shapeOf(d("$and", 1), nil)
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

func key(kv ...any) []keyField {
	raw, err := bson.Marshal(d(kv...))
	if err != nil {
		panic(err)
	}
	k, err := parseKey(raw)
	if err != nil {
		panic(err)
	}
	return k
}

func TestAssessIndexServesShape(t *testing.T) {
	// status: equality; createdAt: sort descending; total: range.
	sh, err := shapeOf(d("status", "paid", "total", d("$gt", 100)), d("createdAt", -1))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		ix   indexSpec
		want fit
	}{
		{"ESR", indexSpec{Key: key("status", 1, "createdAt", -1, "total", 1)}, fitFull},
		{"ESR walked backwards", indexSpec{Key: key("status", 1, "createdAt", 1, "total", 1)}, fitFull},
		{"ESR with trailing fields", indexSpec{Key: key("status", 1, "createdAt", -1, "total", 1, "x", 1)}, fitFull},
		{"range before sort", indexSpec{Key: key("status", 1, "total", 1, "createdAt", -1)}, fitOrder},
		{"sort before equality", indexSpec{Key: key("createdAt", -1, "status", 1, "total", 1)}, fitOrder},
		{"equality and sort only", indexSpec{Key: key("status", 1, "createdAt", -1)}, fitPartial},
		{"equality only", indexSpec{Key: key("status", 1)}, fitPartial},
		{"unrelated first field", indexSpec{Key: key("customerId", 1, "status", 1)}, fitNone},
		{"hidden", indexSpec{Key: key("status", 1, "createdAt", -1, "total", 1), Hidden: true}, fitNone},
		{"partial", indexSpec{Key: key("status", 1, "createdAt", -1, "total", 1), Partial: bson.Raw{5, 0, 0, 0, 0}}, fitNone},
		{"hashed equality", indexSpec{Key: key("status", "hashed")}, fitPartial},
		{"text", indexSpec{Key: key("_fts", "text", "_ftsx", 1)}, fitNone},
	} {
		got, why := assess(sh, tc.ix)
		require.Equal(t, tc.want, got, "%s: %s", tc.name, why)
		require.NotEmpty(t, why)
	}

	// Sort directions: {a: 1, b: -1} cannot be read from {a: 1, b: 1}.
	sh2, err := shapeOf(nil, d("a", 1, "b", -1))
	require.NoError(t, err)
	got, why := assess(sh2, indexSpec{Key: key("a", 1, "b", 1)})
	require.Equal(t, fitOrder, got)
	require.Contains(t, why, "directions")
	got, _ = assess(sh2, indexSpec{Key: key("a", -1, "b", 1)})
	require.Equal(t, fitFull, got, "the index walked backwards gives the sort")

	// A range on a hashed field cannot use the hashed index.
	sh3, err := shapeOf(d("a", d("$gt", 1)), nil)
	require.NoError(t, err)
	got, _ = assess(sh3, indexSpec{Key: key("a", "hashed")})
	require.Equal(t, fitNone, got)
}

// TestShapeWithoutRegexI: a field matched by a case-insensitive $regex
// gives an index no bounds, so the index analysis leaves it out, unless
// the shape sorts on it.
func TestShapeWithoutRegexI(t *testing.T) {
	re := d("$regex", "^ann", "$options", "i")
	for _, tc := range []struct {
		filter, sort bson.D
		want         []string
	}{
		{d("email", re), nil, nil},
		{d("email", bson.Regex{Pattern: "ann", Options: "i"}), nil, nil},
		{d("status", "paid", "email", re), nil, []string{"status"}},
		{d("status", "paid", "email", re, "total", d("$gt", 5)), d("createdAt", -1), []string{"status", "createdAt", "total"}},
		{d("email", re), d("email", 1), []string{"email"}},
		{d("email", d("$regex", "^ann")), nil, []string{"email"}},
	} {
		sh, err := shapeOf(tc.filter, tc.sort)
		require.NoError(t, err)
		require.Equal(t, tc.want, sh.withoutRegexI().fields(), "%v sort %v", tc.filter, tc.sort)
	}
}

func TestQueryFindingsFromFitAndPlan(t *testing.T) {
	q := Query{Collection: "orders", Filter: d("status", "paid"), Sort: d("createdAt", -1)}
	sh, err := shapeOf(q.Filter, q.Sort)
	require.NoError(t, err)
	specs := []indexSpec{{Name: "_id_", Key: key("_id", 1)}, {Name: "status_1_createdAt_-1", Key: key("status", 1, "createdAt", -1)}}
	ixscan := &planReading{Readable: true, Form: "winningPlan", Indexes: []string{"status_1_createdAt_-1"}, Text: "FETCH > IXSCAN status_1_createdAt_-1"}
	collscan := &planReading{Readable: true, Form: "winningPlan", Scan: true, Text: "COLLSCAN"}

	require.Empty(t, queryFindings(q, sh, specs, 1, fitFull, "", ixscan), "served and planned on the index")
	fs := queryFindings(q, sh, specs, 1, fitFull, "", collscan)
	require.Len(t, fs, 1)
	require.Equal(t, RuleUnindexedQuery, fs[0].Rule)
	require.Equal(t, Warning, fs[0].Severity)
	plan, _ := fs[0].Evidence.Get("plan")
	require.Equal(t, "winningPlan: COLLSCAN", plan)

	fs = queryFindings(q, sh, specs, -1, fitNone, "", nil)
	require.Len(t, fs, 1)
	require.Equal(t, "no index serves the shape", fs[0].Message)
	esr, _ := fs[0].Evidence.Get("esrIndex")
	require.Equal(t, "{status: 1, createdAt: -1}", esr)
	_, hasPlan := fs[0].Evidence.Get("plan")
	require.False(t, hasPlan, "no explain, no plan in the evidence")

	fs = queryFindings(q, sh, specs, 1, fitPartial, "serves status", ixscan)
	require.Equal(t, Info, fs[0].Severity, "partly served, and the plan uses the index")
	fs = queryFindings(q, sh, specs, 1, fitOrder, "out of order", ixscan)
	require.Equal(t, RuleESROrder, fs[0].Rule)
	require.Equal(t, "status_1_createdAt_-1", fs[0].Index)
}

// TestQueryFindingsFromAnUnreadablePlan: FerretDB 1.x's SQLite plan reads
// SCAN for every filter, _id lookups included. It must not make a served
// shape a warning (a false CI failure): the finding says, at info level,
// that the plan is unreadable, and the indexes alone decide the rest.
func TestQueryFindingsFromAnUnreadablePlan(t *testing.T) {
	sqlite := readPlan(ext(t, `{"queryPlanner": {"Plan": ["id=2 parent=0 notused=0 detail=SCAN orders_325e96ec"]}, "explainVersion": "1", "filterPushdown": false}`))
	require.False(t, sqlite.Readable)
	specs := []indexSpec{{Name: "_id_", Key: key("_id", 1)}, {Name: "status_1_createdAt_-1", Key: key("status", 1, "createdAt", -1)}}
	for _, tc := range []struct {
		name     string
		q        Query
		best     int
		fit      fit
		severity Severity
		message  string
	}{
		{"an _id lookup", Query{Collection: "orders", Filter: d("_id", "o1")}, 0, fitFull, Info,
			"plan unreadable: index _id_ serves the shape by its key; the server's plan cannot say whether the server uses it"},
		{"an indexed query", Query{Collection: "orders", Filter: d("status", "paid"), Sort: d("createdAt", -1)}, 1, fitFull, Info,
			"plan unreadable: index status_1_createdAt_-1 serves the shape by its key; the server's plan cannot say whether the server uses it"},
		{"a query no index serves", Query{Collection: "orders", Filter: d("total", d("$gt", 100))}, -1, fitNone, Warning,
			"no index serves the shape"},
		{"a query an index serves in part", Query{Collection: "orders", Filter: d("status", "paid", "total", d("$gt", 100))}, 1, fitPartial, Info,
			"no index serves the whole shape; status_1_createdAt_-1 serves status"},
	} {
		sh, err := shapeOf(tc.q.Filter, tc.q.Sort)
		require.NoError(t, err)
		fs := queryFindings(tc.q, sh, specs, tc.best, tc.fit, "serves status", &sqlite)
		require.Len(t, fs, 1, tc.name)
		require.Equal(t, RuleUnindexedQuery, fs[0].Rule, tc.name)
		require.Equal(t, tc.severity, fs[0].Severity, tc.name)
		require.Equal(t, tc.message, fs[0].Message, tc.name)
		plan, _ := fs[0].Evidence.Get("plan")
		require.Equal(t, `unreadable: SQLite's plan "SCAN orders_325e96ec" names no index, and that form reads SCAN for a lookup by _id too: it cannot say whether an index serves the query`, plan, tc.name)
		_, claimed := fs[0].Evidence.Get("collectionScan")
		require.False(t, claimed, "%s: no claim about a scan", tc.name)
	}
}

func TestParseQuery(t *testing.T) {
	q, err := ParseQuery([]byte(`{"collection": "orders", "filter": {"status": "paid", "at": {"$gte": {"$date": "2026-01-01T00:00:00Z"}}}, "sort": {"at": -1}, "name": "recent"}`))
	require.NoError(t, err)
	require.Equal(t, "orders", q.Collection)
	require.Equal(t, "recent", q.Name)
	require.Equal(t, "recent", q.String())
	require.Len(t, q.Filter, 2)
	require.IsType(t, bson.D{}, q.Filter[1].Value, "nested documents decode as bson.D, in order")
	q.Name = ""
	require.Equal(t, `orders {"status":"paid","at":{"$gte":{"$date":"2026-01-01T00:00:00Z"}}} sort {"at":-1}`, q.String())

	for _, bad := range []string{
		``, `[]`, `{"collection": "orders"}`, `{"filter": {}}`,
		`{"collection": 1, "filter": {}}`, `{"collection": "o", "filter": []}`,
		`{"collection": "o", "filter": {}, "limit": 3}`, `{"collection": "o", "filter": {}, "sort": {"a": 2}}`,
		`{"collection": "o", "collection": "p", "filter": {}}`, `{"collection": "system.x", "filter": {}}`,
	} {
		_, err := ParseQuery([]byte(bad))
		require.ErrorIs(t, err, patterns.ErrInvalid, bad)
		require.ErrorContains(t, err, "doctor: ParseQuery:", bad)
	}
}

func FuzzParseQuery(f *testing.F) {
	f.Add(`{"collection": "orders", "filter": {"status": "paid"}, "sort": {"at": -1}}`)
	f.Add(`{"collection": "c", "filter": {"$and": [{"a": {"$in": [1, 2]}}, {"b": {"$regex": "x", "$options": "i"}}]}}`)
	f.Add(`{"collection": "c", "filter": {"a": {"$elemMatch": {"b": 1}}}, "sort": {"s": {"$meta": "textScore"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery([]byte(s))
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			return
		}
		sh, err := shapeOf(q.Filter, q.Sort)
		require.NoError(t, err, "a parsed query has a shape")
		for _, f := range sh.esrKey() {
			require.Contains(t, []int{1, -1}, f.Dir)
		}
		_ = q.String()
	})
}
