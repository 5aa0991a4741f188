package keyset_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestPagesOddIDs: every generated _id the server stores, among numeric
// _ids, at every place of a page (pages of 1 to 3 documents): the scan
// yields every document once, in the order of one find sorted by _id, or
// yields those before it and stops with an error wrapping
// patterns.ErrInvalid that names it. Never a document skipped in silence
// (issue 31: a NaN ended the numbers; MaxKey, JavaScript and symbol _ids
// were skipped).
func TestPagesOddIDs(t *testing.T) {
	coll := mongotest.DB(t).Collection("c")
	numbers := []any{int32(10), int64(20), 30.5, int32(40)}
	for _, v := range bsonkinds.IDs() {
		t.Run(v.Name, func(t *testing.T) { checkOddID(t, coll, v, numbers) })
	}
}

// checkOddID checks the scans of coll holding the _id v and numbers.
func checkOddID(t *testing.T, coll *mongo.Collection, v bsonkinds.Value, numbers []any) {
	ctx := context.Background()
	_, err := coll.DeleteMany(ctx, bson.D{})
	require.NoError(t, err)
	if _, err := coll.InsertOne(ctx, v.Doc("_id")); err != nil {
		t.Skipf("not stored: %v", err)
	}
	for _, id := range numbers {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}})
		require.NoError(t, err)
	}
	want := sortedIDs(t, coll)
	for size := 1; size <= 3; size++ {
		var got []string
		var scanErr error
		for page, err := range keyset.Pages(ctx, coll, nil, size, 0) {
			if err != nil {
				scanErr = err
				break
			}
			for _, d := range page {
				got = append(got, d.Lookup("_id").String())
			}
		}
		name := fmt.Sprintf("pages of %d", size)
		if scanErr == nil {
			require.Equal(t, want, got, name)
			continue
		}
		require.ErrorIs(t, scanErr, patterns.ErrInvalid, name)
		require.ErrorContains(t, scanErr, bsonid.Text(v.V), name)
		require.Equal(t, want[:len(got)], got, name)
	}
}

// sortedIDs returns the _ids of coll, by one find sorted by _id.
func sortedIDs(t *testing.T, coll *mongo.Collection) []string {
	t.Helper()
	cur, err := coll.Find(context.Background(), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	require.NoError(t, err)
	var docs []bson.Raw
	require.NoError(t, cur.All(context.Background(), &docs))
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.Lookup("_id").String()
	}
	return ids
}
