package subset

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// unitDB is a database handle for tests that build documents and send
// nothing.
func unitDB() *mongo.Database { return mongotest.Client().Database("subset_unit") }

type review struct {
	ID        bson.ObjectID `bson:"_id"`
	ProductID string        `bson:"productId,omitempty"`
	Stars     int           `bson:"stars"`
}

func reviewRepo(t *testing.T, idField string) *Repo[bson.M, review] {
	t.Helper()
	r, err := New[bson.M, review](unitDB(), Config{
		Parents: "products", Field: "reviews",
		Items: "reviews", ParentField: "productId", IDField: idField,
		SortField: "stars", Descending: true, Cap: 10,
	})
	require.NoError(t, err)
	return r
}

func mustEntry(t *testing.T, r *Repo[bson.M, review], rv review) entry {
	t.Helper()
	p, err := newParentRef(r.cfg.ParentField, "p1")
	require.NoError(t, err)
	e, err := r.encode(rv, p, true)
	require.NoError(t, err)
	return e
}

// TestPushUpdate pins the native path's update: the guard, $each, $sort
// in the configured order with the id as tie-break in the same direction,
// $slice at the cap, and the revision.
func TestPushUpdate(t *testing.T) {
	r := reviewRepo(t, "")
	id1, id2 := bson.NewObjectID(), bson.NewObjectID()
	e1, e2 := mustEntry(t, r, review{ID: id1, Stars: 5}), mustEntry(t, r, review{ID: id2, Stars: 3, ProductID: "p1"})
	filter, update := r.pushUpdate("p1", []entry{e1, e2})
	require.Equal(t, bson.D{
		{Key: "_id", Value: "p1"},
		{Key: "reviews._id", Value: bson.D{{Key: "$nin", Value: []bson.RawValue{e1.id, e2.id}}}},
	}, filter)
	require.Equal(t, bson.D{
		{Key: "$push", Value: bson.D{{Key: "reviews", Value: bson.D{
			{Key: "$each", Value: bson.A{e1.doc, e2.doc}},
			{Key: "$sort", Value: bson.D{{Key: "stars", Value: -1}, {Key: "_id", Value: -1}}},
			{Key: "$slice", Value: 10},
		}}}},
		{Key: "$inc", Value: bson.D{{Key: "reviewsRev", Value: int64(1)}}},
	}, update)

	// What goes on the wire, in canonical Extended JSON.
	o1, o2 := `{"$oid":"`+id1.Hex()+`"}`, `{"$oid":"`+id2.Hex()+`"}`
	requireJSON(t, `{"_id":"p1","reviews._id":{"$nin":[`+o1+`,`+o2+`]}}`, filter)
	requireJSON(t, `{"$push":{"reviews":{"$each":[`+
		`{"_id":`+o1+`,"stars":{"$numberInt":"5"},"productId":"p1"},`+
		`{"_id":`+o2+`,"productId":"p1","stars":{"$numberInt":"3"}}],`+
		`"$sort":{"stars":{"$numberInt":"-1"},"_id":{"$numberInt":"-1"}},"$slice":{"$numberInt":"10"}}},`+
		`"$inc":{"reviewsRev":{"$numberLong":"1"}}}`, update)
}

// TestSetUpdate pins the compare-and-set of a recomputation, before the
// first write (no revision yet) and after.
func TestSetUpdate(t *testing.T) {
	r := reviewRepo(t, "")
	top := []bson.Raw{mustEntry(t, r, review{ID: bson.NewObjectID(), Stars: 4}).doc}
	filter, update := r.setUpdate("p1", parentState{}, nil)
	require.Equal(t, bson.D{{Key: "_id", Value: "p1"}, {Key: "reviewsRev", Value: bson.D{{Key: "$exists", Value: false}}}}, filter)
	require.Equal(t, bson.D{
		{Key: "$set", Value: bson.D{{Key: "reviews", Value: []bson.Raw{}}}},
		{Key: "$inc", Value: bson.D{{Key: "reviewsRev", Value: int64(1)}}},
	}, update, "no items set an empty array, not null")

	filter, update = r.setUpdate("p1", parentState{rev: 7, hasRev: true}, top)
	require.Equal(t, bson.D{{Key: "_id", Value: "p1"}, {Key: "reviewsRev", Value: int64(7)}}, filter)
	require.Equal(t, bson.D{
		{Key: "$set", Value: bson.D{{Key: "reviews", Value: top}}},
		{Key: "$inc", Value: bson.D{{Key: "reviewsRev", Value: int64(1)}}},
	}, update)
}

// TestPageFilter pins the keyset filter in both directions.
func TestPageFilter(t *testing.T) {
	c := Cursor{sort: rawValue(t, 4), id: rawValue(t, "r9")}
	for _, tc := range []struct {
		descending bool
		op         string
	}{{true, "$lt"}, {false, "$gt"}} {
		r := reviewRepo(t, "reviewId")
		r.cfg.Descending = tc.descending
		require.Equal(t, bson.D{{Key: "productId", Value: "p1"}}, r.pageFilter("p1", Cursor{}))
		require.Equal(t, bson.D{
			{Key: "productId", Value: "p1"},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "stars", Value: bson.D{{Key: tc.op, Value: c.sort}}}},
				bson.D{{Key: "stars", Value: c.sort}, {Key: "reviewId", Value: bson.D{{Key: tc.op, Value: c.id}}}},
			}},
		}, r.pageFilter("p1", c))
	}
}

// TestEncode checks the stored document: the parent field appended when
// the item lacks it, and a generated _id only when IDField is not _id and
// the item has none.
func TestEncode(t *testing.T) {
	type keyed struct {
		ReviewID string `bson:"reviewId"`
		Stars    int    `bson:"stars"`
	}
	r, err := New[bson.M, keyed](unitDB(), Config{
		Parents: "products", Field: "reviews", Items: "reviews", ParentField: "productId",
		IDField: "reviewId", SortField: "stars", Cap: 3,
	})
	require.NoError(t, err)
	p, err := newParentRef("productId", "p1")
	require.NoError(t, err)
	e, err := r.encode(keyed{ReviewID: "r1", Stars: 2}, p, true)
	require.NoError(t, err)
	var got bson.D
	require.NoError(t, bson.Unmarshal(e.doc, &got))
	require.Len(t, got, 4)
	require.Equal(t, "_id", got[0].Key)
	require.IsType(t, bson.ObjectID{}, got[0].Value)
	require.Equal(t, bson.D{{Key: "reviewId", Value: "r1"}, {Key: "stars", Value: int32(2)}, {Key: "productId", Value: "p1"}}, got[1:])
	require.Equal(t, "r1", e.id.StringValue())

	e, err = r.encode(keyed{ReviewID: "r1", Stars: 2}, p, false)
	require.NoError(t, err)
	got = nil
	require.NoError(t, bson.Unmarshal(e.doc, &got))
	require.Equal(t, bson.D{{Key: "reviewId", Value: "r1"}, {Key: "stars", Value: int32(2)}, {Key: "productId", Value: "p1"}}, got, "an update keeps the stored _id")
}

func rawValue(t *testing.T, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

func requireJSON(t *testing.T, want string, v any) {
	t.Helper()
	got, err := bson.MarshalExtJSON(v, true, false)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
}
