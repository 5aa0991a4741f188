package subset_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

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

// TestAParentTooLargeForItsSubset has a parent whose own fields take 9
// MiB, with a cap of 1: an item of 8 MiB is within the cap's limit, but
// not beside them. The Add that would pass 16 MiB fails with ErrTooLarge
// and leaves nothing (where the server refuses the update its error is
// classified; where it would store it, the repository measures the
// parent first), so that later recomputations still succeed. An Update
// that would pass it keeps the new version in the items collection and
// the old one in the subset, as documented. (The documents are large:
// the embedded dev server takes about a second for each command here.)
func TestAParentTooLargeForItsSubset(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[bson.M, bson.M](t, db, config(1), plan)
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", bson.M{"_id": int64(9), "parent": "a", "score": int64(0), "body": "small"}))
		_, err := db.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "blob", Value: strings.Repeat("b", 9<<20)}}}})
		require.NoError(t, err)
		big := func(id, score int) bson.M {
			return bson.M{"_id": int64(id), "parent": "a", "score": int64(score), "body": strings.Repeat("x", 8<<20)}
		}

		err = r.Add(ctx, "a", big(2, 5))
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.ErrorContains(t, err, `subset: Add: parent "a": `)
		require.Zero(t, count(t, db.Collection("items"), bson.D{{Key: "_id", Value: 2}}), "the item is taken back")
		require.NoError(t, r.Rebuild(ctx, "a"), "what the items collection holds still fits")

		err = r.Update(ctx, "a", big(9, 0))
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.ErrorContains(t, err, `subset: Update: parent "a": item 9: `)
		require.Equal(t, "small", body(t, r, "a", 0), "the subset keeps the old version of item 9")
	})
}

// body returns the body of the i-th item of the parent's subset.
func body(t *testing.T, r *subset.Repo[bson.M, bson.M], parentID string, i int) string {
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
