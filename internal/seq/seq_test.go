package seq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/seq"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

type doc struct {
	ID int `bson:"_id"`
}

func TestCursor(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("c")
	var docs []any
	for i := 1; i <= 7; i++ {
		docs = append(docs, doc{ID: i})
	}
	_, err := coll.InsertMany(ctx, docs)
	require.NoError(t, err)
	counter := mongotest.NewCounter(t, db)
	open := func(ctx context.Context) (*mongo.Cursor, error) {
		return coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(3))
	}
	it := seq.Cursor[doc](ctx, open)
	require.Empty(t, counter.Commands(), "building the iterator sends nothing")

	var got []int
	for d, err := range it {
		require.NoError(t, err)
		got = append(got, d.ID)
	}
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, got)
	require.Equal(t, []string{"find", "getMore", "getMore"}, counter.Commands())

	counter.Reset()
	got = got[:0]
	for d, err := range it {
		require.NoError(t, err)
		got = append(got, d.ID)
		if len(got) == 2 {
			break
		}
	}
	require.Equal(t, []int{1, 2}, got, "the iterator can be ranged again and stopped early")
	require.Equal(t, []string{"find", "killCursors"}, counter.Commands(), "stopping early closes the cursor")

	boom := errors.New("boom")
	n := 0
	for _, err := range seq.Cursor[doc](ctx, func(context.Context) (*mongo.Cursor, error) { return nil, boom }) {
		require.ErrorIs(t, err, boom)
		n++
	}
	require.Equal(t, 1, n)
	n = 0
	for _, err := range seq.Err[doc](boom) {
		require.ErrorIs(t, err, boom)
		n++
	}
	require.Equal(t, 1, n)
}

func TestBatches(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("c")
	var docs []any
	for i := 1; i <= 7; i++ {
		docs = append(docs, doc{ID: i})
	}
	_, err := coll.InsertMany(ctx, docs)
	require.NoError(t, err)
	counter := mongotest.NewCounter(t, db)
	open := func(batch int32) func(context.Context) (*mongo.Cursor, error) {
		return func(ctx context.Context) (*mongo.Cursor, error) {
			return coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(batch))
		}
	}
	sizes := func(n int, batch int32) []int {
		var out []int
		var ids []int
		for b, err := range seq.Batches(ctx, n, open(batch)) {
			require.NoError(t, err)
			out = append(out, len(b))
			for _, raw := range b {
				ids = append(ids, int(raw.Lookup("_id").AsInt64()))
			}
		}
		require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, ids)
		return out
	}
	require.Equal(t, []int{2, 2, 2, 1}, sizes(2, 100), "cut at n")
	require.Equal(t, []int{3, 3, 1}, sizes(10, 3), "cut where the server's batch ends")
	counter.Reset()
	for b, err := range seq.Batches(ctx, 3, open(3)) {
		require.NoError(t, err)
		require.Len(t, b, 3)
		break
	}
	require.Equal(t, []string{"find", "killCursors"}, counter.Commands(), "stopping early closes the cursor")
}
