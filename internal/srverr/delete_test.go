package srverr_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

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

// TestDeleteOneCommands pins what DeleteOne sends: a deleteOne of the
// filter (limit 1); when it matched nothing, a find of the filter
// projected to _id; while that finds the document (here stored just
// before the find, as a delete FerretDB 2.x missed would leave it), a
// delete of the filter without a limit, which deletes it.
func TestDeleteOneCommands(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	filter := bson.D{{Key: "_id", Value: 1}}
	var mu sync.Mutex
	var sent []bson.Raw
	c := mongotest.Connect(t, mongotest.URI(), &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.DatabaseName != db.Name() {
				return
			}
			mu.Lock()
			sent = append(sent, slices.Clone(e.Command))
			mu.Unlock()
			if e.CommandName == "find" {
				_, err := db.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}})
				require.NoError(t, err)
			}
		},
	}, nil)
	deleted, err := srverr.DeleteOne(ctx, c.Database(db.Name()).Collection("c"), filter)
	require.NoError(t, err)
	require.True(t, deleted)
	n, err := db.Collection("c").CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	require.Zero(t, n, "the document is gone")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sent, 3)
	for i, want := range []struct {
		name  string
		limit int32
	}{{"delete", 1}, {"find", 0}, {"delete", 0}} {
		cmd := sent[i]
		require.Equal(t, want.name, cmd.Index(0).Key(), "command %d: %s", i, cmd)
		if want.name == "find" {
			require.Equal(t, bson.Raw(mustMarshal(t, filter)).String(), cmd.Lookup("filter").Document().String())
			require.Equal(t, `{"_id": {"$numberInt":"1"}}`, cmd.Lookup("projection").Document().String())
			continue
		}
		stmt := cmd.Lookup("deletes").Array().Index(0).Document()
		require.Equal(t, bson.Raw(mustMarshal(t, filter)).String(), stmt.Lookup("q").Document().String())
		require.Equal(t, want.limit, stmt.Lookup("limit").Int32(), "command %d: %s", i, cmd)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := bson.Marshal(v)
	require.NoError(t, err)
	return b
}
