package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAppendLeftoverCost counts the commands of the Append that first
// overflows a parent inserted again over overflow documents a Delete left
// behind, against append.go's Append godoc:
//
//	"the Append that first overflows it finds them while the parent is
//	still open ... and deletes them before it closes the parent (a read of
//	the parent and a deleteMany more)."
//
// with "An item that opens a new overflow document adds 1, the update of
// the parent's flag and tail hint ... before the upsert". It found the
// overflow documents again after the deleteMany, a needless find (what it
// found first, all deleted, is nothing of this parent's): three commands
// more, not two.
func TestAppendLeftoverCost(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	indexed, err := New[post, comment](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, indexed.Indexes()...))
	require.NoError(t, indexed.checkIndexed(ctx))
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		require.NoError(t, r.checkIndexed(ctx)) // the listIndexes, once per repository, not counted
		parents++
		id := parents
		// What a Delete that failed between its two deletes leaves: an
		// overflow document of the old parent.
		_, err = r.overflow.InsertOne(ctx, bson.D{{Key: fParent, Value: id}, {Key: fSeq, Value: int64(0)},
			{Key: fCount, Value: int64(1)}, {Key: fBytes, Value: int64(30)}, {Key: fItems, Value: bson.A{bson.D{{Key: "_id", Value: "old"}}}}})
		require.NoError(t, err)
		_, err = r.Insert(ctx, post{ID: id})
		require.NoError(t, err)
		require.NoError(t, r.Append(ctx, id, comments("c", 0, 3)...)) // full, open

		c := mongotest.NewCounter(t, db)
		got := c.Count(func() { require.NoError(t, r.Append(ctx, id, comment{ID: "x"})) })
		// The godoc: (native: the failed push,) the read of the parent, the
		// find of the overflow documents, then "a read of the parent and a
		// deleteMany more", the close, the upsert.
		want := []string{"find", "find", "find", "delete", "update", "update"}
		if p.serverSizeLimit {
			want = append([]string{"update"}, want...)
		}
		t.Logf("sent %v", got)
		require.Equal(t, want, got)
		_, items, err := r.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, []string{"c00", "c01", "c02", "x"}, idsOf(items))
	})
}
