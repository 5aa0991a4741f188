package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestRebuildAllOddParentIDs: among 100 numeric parents, a parent stored
// without the repository whose _id is of a type outside the common ones
// (MinKey, a symbol, a DBPointer, JavaScript, MaxKey) or a NaN is
// rebuilt with the others, or stops RebuildAll with an ErrInvalid naming
// it; never skipped in silence (issue 31: 100 rebuilt, nil returned).
func TestRebuildAllOddParentIDs(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[bson.M, item](t, db, config(3), portable)
	parents := db.Collection("parents")
	docs := make([]any, 100)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int64(i + 1)}}
	}
	_, err := parents.InsertMany(ctx, docs)
	require.NoError(t, err)
	for _, v := range bsonkinds.Odd() {
		t.Run(v.Name, func(t *testing.T) {
			if _, err := parents.InsertOne(ctx, v.Doc("_id")); err != nil {
				t.Skipf("not stored: %v", err)
			}
			defer func() {
				_, err := parents.DeleteOne(ctx, v.Doc("_id"))
				require.NoError(t, err)
			}()
			n, err := r.RebuildAll(ctx, nil)
			if err != nil {
				require.ErrorIs(t, err, patterns.ErrInvalid)
				require.ErrorContains(t, err, bsonid.Text(v.V))
				return
			}
			require.Equal(t, 101, n)
		})
	}
}
