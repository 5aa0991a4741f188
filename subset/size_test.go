package subset_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestItemsOfHalfADocumentWithACapOfTwo are refused: two of them, with
// the parent's _id, the subset's element keys and the revision, would
// make a parent of 16,777,284 bytes, which MongoDB refuses and FerretDB
// 1.x stores.
func TestItemsOfHalfADocumentWithACapOfTwo(t *testing.T) {
	db := mongotest.DB(t)
	r := newRepo[bson.M, bson.M](t, db, config(2), portable)
	insertParents(t, db, "a")
	half := func(id int) bson.M {
		m := bson.M{"_id": id, "score": 1, "parent": "a", "body": ""}
		b, err := bson.Marshal(m)
		require.NoError(t, err)
		m["body"] = strings.Repeat("x", patterns.MaxDocumentSize/2-len(b))
		b, err = bson.Marshal(m)
		require.NoError(t, err)
		require.Len(t, b, patterns.MaxDocumentSize/2)
		return m
	}
	err := r.Add(context.Background(), "a", half(1), half(2))
	require.ErrorIs(t, err, patterns.ErrTooLarge)
	require.ErrorContains(t, err, `subset: Add: parent "a": items[0]: item 1 is 8388608 bytes; with a cap of 2, an item may take at most `)
	require.Zero(t, count(t, db.Collection("items"), bson.D{}))
}

// TestAParentTooLargeForItsSubset has a cap of 1 and a parent with a
// field of its own: an item of the largest size the cap allows fills a
// parent that holds nothing else, so beside that field it would take the
// parent past 16 MiB. The Add fails with ErrTooLarge and leaves nothing
// (where the server refuses the update, its error is classified; where
// it would store it, the repository measures the parent first), so that
// later recomputations still succeed. (Each command that carries the
// item takes the embedded dev server seconds.)
func TestAParentTooLargeForItsSubset(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		r, items := tightParent(t, plan)
		err := r.Add(ctx, "a", largest(t, 2, 5))
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.ErrorContains(t, err, `subset: Add: parent "a": `)
		require.Zero(t, count(t, items, bson.D{{Key: "_id", Value: 2}}), "the item is taken back")
		require.NoError(t, r.Rebuild(ctx, "a"), "what the items collection holds still fits")
		require.Equal(t, "small", body(t, r, "a", 0))
	})
}

// TestUpdateTooLargeForItsParent: an Update that would take the parent
// past 16 MiB keeps the new version in the items collection and the old
// one in the subset, as documented, and Rebuild says why until the parent
// has room. It needs a server that refuses such an update, on which it
// checks that every recomputation classifies the server's error (the
// measuring path is the one TestAParentTooLargeForItsSubset takes on
// every server).
func TestUpdateTooLargeForItsParent(t *testing.T) {
	mongotest.Require(t, patterns.FeatureUpdateSizeLimit)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		r, items := tightParent(t, plan)
		err := r.Update(ctx, "a", largest(t, 9, 0))
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.ErrorContains(t, err, `subset: Update: parent "a": item 9: `)
		require.EqualValues(t, 1, count(t, items, bson.D{{Key: "_id", Value: 9}, {Key: "body", Value: bson.D{{Key: "$ne", Value: "small"}}}}), "the new version is stored")
		require.Equal(t, "small", body(t, r, "a", 0), "the subset keeps the old version")
		require.ErrorIs(t, r.Rebuild(ctx, "a"), patterns.ErrTooLarge)
	})
}

// tightParent stores the parent "a" with a field of its own (72 bytes)
// and, with a cap of 1, a small item 9 in its subset.
func tightParent(t *testing.T, plan subset.Plan) (*subset.Repo[bson.M, any], *mongo.Collection) {
	t.Helper()
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[bson.M, any](t, db, config(1), plan)
	// The parent's own field takes more than the push field, which the
	// item's limit counts and the portable plan never writes.
	_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "name", Value: strings.Repeat("a parent ", 8)}})
	require.NoError(t, err)
	require.NoError(t, r.Add(ctx, "a", bson.M{"_id": int64(9), "parent": "a", "score": int64(0), "body": "small"}))
	return r, db.Collection("items")
}

// largest returns an item of the largest size a cap of 1 allows under
// the parent "a": the parent's _id, the subset, the revision and the
// push field fill 16 MiB with it.
func largest(t *testing.T, id, score int64) bson.D {
	t.Helper()
	it := bson.D{{Key: "_id", Value: id}, {Key: "parent", Value: "a"}, {Key: "score", Value: score}, {Key: "body", Value: ""}}
	full, err := bson.Marshal(bson.D{{Key: "_id", Value: "a"}, {Key: "top", Value: bson.A{it}}, {Key: "topRev", Value: int64(1)}, {Key: "topPushed", Value: bson.NewObjectID()}})
	require.NoError(t, err)
	it[3].Value = strings.Repeat("x", patterns.MaxDocumentSize-len(full))
	return it
}

// body returns the body of the i-th item of the parent's subset.
func body(t *testing.T, r *subset.Repo[bson.M, any], parentID string, i int) string {
	t.Helper()
	p, err := r.Get(context.Background(), parentID)
	require.NoError(t, err)
	top := p["top"].(bson.A)
	require.Len(t, top, i+1)
	for _, e := range top[i].(bson.D) {
		if e.Key == "body" {
			return e.Value.(string)
		}
	}
	return ""
}
