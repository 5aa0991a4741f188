package subset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// reviewsConfig is the configuration of the pinned commands: the ten
// best reviews of a product, by stars, most first.
func reviewsConfig(idField string) Config {
	cfg, err := Config{
		Parents: "products", Field: "reviews",
		Items: "reviews", ParentField: "productId", IDField: idField,
		SortField: "stars", Descending: true, Cap: 10,
	}.normalize()
	if err != nil {
		panic(err)
	}
	return cfg
}

func raw(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

func rawValue(t testing.TB, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

// requireJSON checks what goes on the wire, in canonical Extended JSON.
func requireJSON(t *testing.T, want string, v any, msg ...any) {
	t.Helper()
	got, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
	require.NoError(t, err)
	require.JSONEq(t, `{"v":`+want+`}`, string(got), msg...)
}

// plans are the distinct plans of the servers the library knows, and of
// a server that limits sizes but lacks $sortArray (MongoDB before 5.2).
func plans(t *testing.T) map[plan][]string {
	out := map[plan][]string{}
	servers := mongotest.KnownServers()
	servers["FerretDB 2.7 without $sortArray"] = servers["FerretDB 2.7"].Without(patterns.FeatureSortArray)
	for name, srv := range servers {
		p := planFor(srv)
		out[p] = append(out[p], name)
	}
	require.Len(t, out, 3, "push; portable measuring; portable on a server that limits sizes")
	return out
}

// TestParentCommands pins the filters and projections on the parents,
// for every plan.
func TestParentCommands(t *testing.T) {
	c := newCommands(reviewsConfig(""))
	requireJSON(t, `{"_id":"p1"}`, c.parent("p1"))
	requireJSON(t, `{"_id":"p1","reviews._id":{"$numberInt":"7"}}`, c.parentHolding("p1", 7))
	var o options.FindOptions
	for _, set := range c.idsOnly().List() {
		require.NoError(t, set(&o))
	}
	require.Equal(t, bson.D{{Key: "_id", Value: 1}}, o.Projection, "RebuildAll's pages (package keyset) read the ids alone")
	var one options.FindOneOptions
	for _, set := range c.parentFound().List() {
		require.NoError(t, set(&one))
	}
	require.Equal(t, bson.D{{Key: "reviewsRev", Value: 1}}, one.Projection, "the push plan's Add reads whether its parent exists, and its incarnation: its revision (and _id) alone")

	for p, servers := range plans(t) {
		proj := c.parentState(p)
		if p.measure {
			require.Nil(t, proj, "%v read the whole parent, to know its size", servers)
		} else if p.push {
			requireJSON(t, `{"reviewsRev":{"$numberInt":"1"},"reviews._id":{"$numberInt":"1"},"reviewsPushed":{"$numberInt":"1"}}`, proj)
		} else {
			requireJSON(t, `{"reviewsRev":{"$numberInt":"1"},"reviews._id":{"$numberInt":"1"}}`, proj)
		}
	}

	rev := parentState{rev: 7, hasRev: true}
	token := bson.NewObjectID()
	revPushed := parentState{rev: 7, hasRev: true, pushed: rawValue(t, token)}
	const notFull = `{"$expr":{"$lt":[{"$size":{"$cond":[{"$isArray":"$reviews"},"$reviews",[]]}},{"$numberInt":"10"}]}}`
	for p, servers := range plans(t) {
		plain := `{"_id":"p1","reviewsRev":{"$numberLong":"7"}}`
		if !p.push {
			requireJSON(t, plain, c.casFilter(p, "p1", rev, false), "%v", servers)
			requireJSON(t, plain, c.casFilter(p, "p1", revPushed, false), "%v", servers)
			continue
		}
		// No push since the read (the push field as read, or absent as
		// read), or a subset not full: nothing sorted out.
		requireJSON(t, `{"_id":"p1","reviewsRev":{"$numberLong":"7"},"$or":[{"reviewsPushed":{"$exists":false}},`+notFull+`]}`,
			c.casFilter(p, "p1", rev, false), "%v", servers)
		requireJSON(t, `{"_id":"p1","reviewsRev":{"$numberLong":"7"},"$or":[{"reviewsPushed":{"$eq":{"$oid":"`+token.Hex()+`"}}},`+notFull+`]}`,
			c.casFilter(p, "p1", revPushed, false), "%v", servers)
		// Announced: no push lands until the revision moves.
		requireJSON(t, plain, c.casFilter(p, "p1", revPushed, true), "%v", servers)
		var o options.FindOneAndUpdateOptions
		for _, set := range c.announced(p).List() {
			require.NoError(t, set(&o))
		}
		require.Equal(t, options.After, *o.ReturnDocument, "%v", servers)
		require.Equal(t, c.parentState(p), o.Projection, "%v: the announcing read reads what a find would", servers)
	}
	requireJSON(t, `{"$set":{"reviewsPushed":true}}`, c.announce())
	// The stamp of a parent without a revision, before its first
	// compare-and-set: a random multiple of 2^32.
	requireJSON(t, `{"_id":"p1","$or":[{"reviewsRev":{"$not":{"$type":"long"}}},{"reviewsRev":{"$lt":{"$numberLong":"4294967296"}}},{"reviewsRev":{"$gte":{"$numberLong":"4611686022722355200"}}},{"reviewsRev":{"$type":"array"}}]}`, c.unstamped("p1"))
	for p, servers := range plans(t) {
		if p.push {
			// A copy of a parent made while pushes were held off
			// carries true in the push field: the stamp replaces it.
			requireJSON(t, `{"$set":{"reviewsRev":{"$numberLong":"8589934592"},"reviewsPushed":{"$oid":"`+token.Hex()+`"}}}`, c.stamp(p, 2<<32, token), "%v", servers)
		} else {
			requireJSON(t, `{"$set":{"reviewsRev":{"$numberLong":"8589934592"}}}`, c.stamp(p, 2<<32, token), "%v", servers)
		}
	}
	// The announcement, bound to the incarnation recomputed.
	requireJSON(t, `{"_id":"p1","reviewsRev":{"$gte":{"$numberLong":"12884901888"},"$lt":{"$numberLong":"17179869184"}}}`, c.inIncarnation("p1", 3<<32))
	for range 100 {
		n := newIncarnation()
		require.True(t, n >= 1<<32 && n <= 1<<62 && n%(1<<32) == 0, "%d: a multiple of 2^32 from 2^32 to 2^62", n)
	}
}

// TestPushCommands pins the push plan's Add: the guard, $each, $sort in
// the configured order with the id as tie-break in the same direction,
// $slice at the cap, the push field set to a new ObjectID, and no
// revision.
func TestPushCommands(t *testing.T) {
	c := newCommands(reviewsConfig(""))
	id1, id2 := bson.NewObjectID(), bson.NewObjectID()
	d1 := raw(t, bson.D{{Key: "_id", Value: id1}, {Key: "stars", Value: 5}, {Key: "productId", Value: "p1"}})
	d2 := raw(t, bson.D{{Key: "_id", Value: id2}, {Key: "productId", Value: "p1"}, {Key: "stars", Value: 3}})
	o1, o2 := `{"$oid":"`+id1.Hex()+`"}`, `{"$oid":"`+id2.Hex()+`"}`
	// Bound to the incarnation the Add read, 3 * 2^32: its revision from
	// the stamp to the next.
	// No recomputation announced: the push field is not true.
	requireJSON(t, `{"_id":"p1","reviewsRev":{"$gte":{"$numberLong":"12884901888"},"$lt":{"$numberLong":"17179869184"}},"reviews._id":{"$nin":[`+o1+`,`+o2+`]},`+
		`"reviewsPushed":{"$ne":true}}`,
		c.pushFilter("p1", 3<<32, []bson.RawValue{rawValue(t, id1), rawValue(t, id2)}))
	requireJSON(t, `{"$push":{"reviews":{"$each":[`+
		`{"_id":`+o1+`,"stars":{"$numberInt":"5"},"productId":"p1"},`+
		`{"_id":`+o2+`,"productId":"p1","stars":{"$numberInt":"3"}}],`+
		`"$sort":{"stars":{"$numberInt":"-1"},"_id":{"$numberInt":"-1"}},"$slice":{"$numberInt":"10"}}},`+
		`"$set":{"reviewsPushed":`+o1+`}}`,
		c.pushUpdate([]bson.Raw{d1, d2}, id1))

	asc := reviewsConfig("reviewId")
	asc.Descending = false
	requireJSON(t, `{"$push":{"reviews":{"$each":[],"$sort":{"stars":{"$numberInt":"1"},"reviewId":{"$numberInt":"1"}},"$slice":{"$numberInt":"10"}}},"$set":{"reviewsPushed":`+o2+`}}`,
		newCommands(asc).pushUpdate([]bson.Raw{}, id2))
}

// TestRecomputationCommands pins the update of a recomputation on every
// plan: the merge pipeline on the push plan, a $set of the subset
// otherwise; both increment the revision; the merge sets the push field
// to a new ObjectID (it ends an announcement).
func TestRecomputationCommands(t *testing.T) {
	c := newCommands(reviewsConfig(""))
	token := bson.NewObjectID()
	top := []bson.Raw{raw(t, bson.D{{Key: "_id", Value: "r1"}, {Key: "stars", Value: 4}, {Key: "note", Value: "$costly"}})}
	stale := []bson.RawValue{rawValue(t, "r0")}
	for p, servers := range plans(t) {
		got := c.recomputation(p, top, stale, 4, token)
		if !p.push {
			requireJSON(t, `{"$set":{"reviews":[{"_id":"r1","stars":{"$numberInt":"4"},"note":"$costly"}]},"$inc":{"reviewsRev":{"$numberLong":"1"}}}`, got)
			requireJSON(t, `{"$set":{"reviews":[]},"$inc":{"reviewsRev":{"$numberLong":"1"}}}`, c.recomputation(p, nil, nil, 0, token))
			continue
		}
		mongotest.Detail(t, "push plan: %v", servers)
		merge := func(top, stale string) string {
			return `[{"$set":{
				"reviews":{"$let":{
					"vars":{"top":{"$literal":` + top + `}},
					"in":{"$slice":[{"$sortArray":{
						"input":{"$concatArrays":["$$top",{"$filter":{
							"input":{"$cond":[{"$isArray":"$reviews"},"$reviews",[]]},
							"as":"e",
							"cond":{"$and":[
								{"$ne":[{"$type":"$$e._id"},"missing"]},
								{"$not":[{"$in":["$$e._id",{"$concatArrays":["$$top._id",{"$literal":` + stale + `}]}]}]}]}}}]},
						"sortBy":{"stars":{"$numberInt":"-1"},"_id":{"$numberInt":"-1"}}}},
						{"$numberInt":"10"}]}}},
				"reviewsRev":{"$add":[{"$ifNull":["$reviewsRev",{"$numberLong":"0"}]},{"$numberLong":"1"}]},
				"reviewsPushed":{"$literal":{"$oid":"` + token.Hex() + `"}}}}]`
		}
		requireJSON(t, merge(`[{"_id":"r1","stars":{"$numberInt":"4"},"note":"$costly"}]`, `["r0"]`), got)
		requireJSON(t, merge(`[]`, `[]`), c.recomputation(p, nil, nil, 0, token),
			"no items and no stale ids send empty arrays, never null")
	}
}

// TestItemCommands pins the filters and options on the items, in both
// directions.
func TestItemCommands(t *testing.T) {
	for _, tc := range []struct {
		descending                bool
		op, dir                   string
		sortTypes, idTypes, dateI string
	}{
		// The server's type order (package keyset): null, numbers,
		// strings, documents, binary data, ObjectIDs, booleans, dates,
		// timestamps. The range operator reaches the values of the
		// cursor's type; {$exists: true, $not: {$type: [the types up to
		// the cursor's]}} those of the types sorted after it, and those
		// a page cannot place (symbols, MinKey, arrays...), wherever they
		// sort, which the page refuses. Descending, a null (or missing)
		// sort value comes after every number, as All yields it, and NaN
		// after every other number: {$type: "number", $not: {$gte: 4}}
		// reaches the numbers below 4 and NaN, {$exists: false} a
		// missing value.
		{true, "$lt", "-1", `{"stars":{"$type":"number","$not":{"$gte":{"$numberInt":"4"}}}},{"stars":{"$exists":true,"$not":{"$type":["number","string","object","binData","objectId","bool","date","timestamp"]}}},{"stars":{"$exists":false}},`,
			`{"stars":{"$numberInt":"4"},"reviewId":{"$exists":true,"$not":{"$type":["string","object","binData","objectId","bool","date","timestamp"]}}},{"stars":{"$numberInt":"4"},"reviewId":{"$exists":false}}`,
			`{"stars":{"$exists":true,"$not":{"$type":["date","timestamp"]}}}`},
		{false, "$gt", "1", `{"stars":{"$gt":{"$numberInt":"4"}}},{"stars":{"$exists":true,"$not":{"$type":["null","number"]}}},`,
			`{"stars":{"$numberInt":"4"},"reviewId":{"$exists":true,"$not":{"$type":["null","number","string"]}}}`,
			`{"stars":{"$exists":true,"$not":{"$type":["null","number","string","object","binData","objectId","bool","date"]}}}`},
	} {
		cfg := reviewsConfig("reviewId")
		cfg.Descending = tc.descending
		c := newCommands(cfg)
		requireJSON(t, `{"productId":"p1"}`, c.items("p1"))
		requireJSON(t, `{"productId":"p1","reviewId":"r9"}`, c.item("p1", "r9"))
		requireJSON(t, `{"productId":"p1","reviewId":{"$in":["r8","r9"]}}`, c.itemsIn("p1", []bson.RawValue{rawValue(t, "r8"), rawValue(t, "r9")}))
		requireJSON(t, `{"_id":{"$in":["d8"]},"$nor":[{"productId":"p1","reviewId":{"$in":["r8"]}}]}`, c.takenElsewhere("p1", []bson.RawValue{rawValue(t, "r8")}, []bson.RawValue{rawValue(t, "d8")}))
		pushed, err := bson.Marshal(bson.D{{Key: "reviewId", Value: "r9"}, {Key: "productId", Value: "p1"}, {Key: "stars", Value: 4}})
		require.NoError(t, err)
		requireJSON(t, `{"productId":"p1","reviewId":{"$in":["r9"]},"$or":[{"reviewId":"r9","stars":{"$numberInt":"4"}}]}`, c.itemsAsPushed("p1", []bson.Raw{pushed}))
		// With IDField other than _id, the generated _id: exact for the
		// count of a push.
		oid := bson.NewObjectID()
		generated, err := bson.Marshal(bson.D{{Key: "_id", Value: oid}, {Key: "reviewId", Value: "r9"}, {Key: "productId", Value: "p1"}, {Key: "stars", Value: 4}})
		require.NoError(t, err)
		requireJSON(t, `{"productId":"p1","reviewId":{"$in":["r9"]},"$or":[{"_id":{"$oid":"`+oid.Hex()+`"},"reviewId":"r9","stars":{"$numberInt":"4"}}]}`, c.itemsAsPushed("p1", []bson.Raw{generated}))

		requireJSON(t, `{"productId":"p1"}`, c.page("p1", Cursor{}))
		after := Cursor{sort: rawValue(t, 4), id: rawValue(t, "r9")}
		want := `{"productId":"p1","$or":[` + tc.sortTypes +
			`{"stars":{"$numberInt":"4"},"reviewId":{"` + tc.op + `":"r9"}},` + tc.idTypes + `]}`
		requireJSON(t, want, c.page("p1", after),
			"the types the server sorts after a number, and after a string, are reached with $not $type")
		date := bson.NewDateTimeFromTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		after = Cursor{sort: rawValue(t, date), id: rawValue(t, bson.Timestamp{T: 1})}
		byDate := c.page("p1", after)[1].Value.(bson.A)
		requireJSON(t, tc.dateI, byDate[1], "the types the server sorts after a date")
		if tc.descending {
			requireJSON(t, `{"stars":{"$lt":{"$date":{"$numberLong":"1796083200000"}}}}`, byDate[0], "no NaN among dates")
			requireJSON(t, `{"stars":{"$exists":false}}`, byDate[2])
			requireJSON(t, `{"stars":{"$date":{"$numberLong":"1796083200000"}},"reviewId":{"$exists":true,"$not":{"$type":["timestamp"]}}}`, byDate[4])
		} else {
			requireJSON(t, `{"stars":{"$date":{"$numberLong":"1796083200000"}},"reviewId":{"$exists":true,"$not":{"$type":["null","number","string","object","binData","objectId","bool","date","timestamp"]}}}`, byDate[3],
				"after a timestamp id, only the types a page cannot place")
		}

		var o options.FindOptions
		for _, set := range c.firstN(10).List() {
			require.NoError(t, set(&o))
		}
		requireJSON(t, `{"stars":{"$numberInt":"`+tc.dir+`"},"reviewId":{"$numberInt":"`+tc.dir+`"}}`, o.Sort)
		require.EqualValues(t, 10, *o.Limit)
		require.EqualValues(t, 11, *o.BatchSize, "one batch, closed in the first reply")
	}
}

// TestCountCommands pins what a count field adds, on every plan: the
// recomputation sets it with the subset (a literal in the merge
// pipeline), and Count reads it alone.
func TestCountCommands(t *testing.T) {
	cfg := reviewsConfig("")
	cfg.CountField = "reviewCount"
	c := newCommands(cfg)
	requireJSON(t, `{"reviewCount":{"$numberInt":"1"}}`, c.countProjection())
	top := []bson.Raw{raw(t, bson.D{{Key: "_id", Value: "r1"}, {Key: "stars", Value: 4}})}
	for p := range plans(t) {
		got := c.recomputation(p, top, nil, 1234, bson.NewObjectID())
		if !p.push {
			requireJSON(t, `{"$set":{"reviews":[{"_id":"r1","stars":{"$numberInt":"4"}}],"reviewCount":{"$numberLong":"1234"}},"$inc":{"reviewsRev":{"$numberLong":"1"}}}`, got)
			continue
		}
		set := got.(bson.A)[0].(bson.D)[0].Value.(bson.D)
		require.Len(t, set, 4)
		requireJSON(t, `{"$literal":{"$numberLong":"1234"}}`, set[3].Value)
		require.Equal(t, "reviewCount", set[3].Key)
	}
	requireJSON(t, `{"$set":{"reviews":[]},"$inc":{"reviewsRev":{"$numberLong":"1"}}}`,
		newCommands(reviewsConfig("")).setUpdate(nil, 1234), "no count field, no count")
}
