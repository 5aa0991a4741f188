package srverr_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestDeleteOneUnderConcurrentUpdates: a document that 4 writers keep
// rewriting is deleted by each DeleteOne, which reports it. On FerretDB
// 2.x a deleteOne of it answers no match most times and leaves it in
// place, so that five of them in a row failed about half the time.
func TestDeleteOneUnderConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	coll := mongotest.DB(t).Collection("c")
	for try := range mongotest.Scale(20, 5) {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: try}, {Key: "n", Value: 0}})
		require.NoError(t, err)
		wctx, stop := context.WithCancel(ctx)
		var acked atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for wctx.Err() == nil {
					if _, err := coll.UpdateByID(wctx, try, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err == nil {
						acked.Add(1)
					}
				}
			})
		}
		require.Eventually(t, func() bool { return acked.Load() >= 8 }, time.Minute, time.Millisecond, "the writers update the document")
		deleted, err := srverr.DeleteOne(ctx, coll, bson.D{{Key: "_id", Value: try}})
		stop()
		wg.Wait()
		require.NoError(t, err, "try %d", try)
		require.True(t, deleted, "try %d", try)
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: try}})
		require.NoError(t, err)
		require.Zero(t, n, "try %d: the document is still there", try)
	}
}
