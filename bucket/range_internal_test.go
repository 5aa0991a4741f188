package bucket

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestLatestKeepsOneCopyOfEachBucket: MongoDB may return a document twice
// from a find when a write moves its entry in the index that serves it
// ahead of the cursor, and the count, which every write changes, is in
// the key of the index that Range and Summaries use. The copies of a
// bucket come in one window (its start never changes); latest keeps one
// of each, the one with the most measurements (the later read), and
// leaves the others alone.
func TestLatestKeepsOneCopyOfEachBucket(t *testing.T) {
	a, b, c := bson.NewObjectID(), bson.NewObjectID(), bson.NewObjectID()
	p := func(n int) []bson.Raw { return make([]bson.Raw, n) }
	window := []rangeBucket{{ID: b, Points: p(2)}, {ID: a, Points: p(3)}, {ID: c, Points: p(1)}, {ID: b, Points: p(4)}, {ID: c, Points: p(1)}}
	got := latest(window, func(b *rangeBucket) bson.ObjectID { return b.ID }, func(b *rangeBucket) int { return len(b.Points) })
	require.Equal(t, []rangeBucket{{ID: a, Points: p(3)}, {ID: b, Points: p(4)}, {ID: c, Points: p(1)}}, got)

	sums := []summaryBucket{{ID: a, Count: 5}, {ID: a, Count: 7}, {ID: a, Count: 6}}
	require.Equal(t, []summaryBucket{{ID: a, Count: 7}}, latest(sums, func(b *summaryBucket) bson.ObjectID { return b.ID }, func(b *summaryBucket) int { return int(b.Count) }))
	require.Empty(t, latest([]summaryBucket(nil), func(b *summaryBucket) bson.ObjectID { return b.ID }, func(b *summaryBucket) int { return int(b.Count) }))
}

// TestRangeYieldsABucketReadTwiceOnce: a window whose bucket the find
// returned twice, before and after a write added a measurement to it,
// yields each measurement once, the added one included.
func TestRangeYieldsABucketReadTwiceOnce(t *testing.T) {
	at := func(m int) bson.Raw {
		raw, err := bson.Marshal(bson.D{{Key: "at", Value: date("2026-03-01T10:00:00Z") + bson.DateTime(m*60000)}, {Key: "v", Value: m}})
		require.NoError(t, err)
		return raw
	}
	id, other := bson.NewObjectID(), bson.NewObjectID()
	start := date("2026-03-01T10:00:00Z")
	window := []rangeBucket{
		{ID: id, Start: start, Points: []bson.Raw{at(0), at(2)}},
		{ID: other, Start: start, Points: []bson.Raw{at(1)}},
		{ID: id, Start: start, Points: []bson.Raw{at(0), at(2), at(3)}}, // the same bucket, read again after a write
	}
	type m struct {
		V int `bson:"v"`
	}
	var got []int
	yieldWindow("at", window, read{from: start, to: start + 3600000}, func(v m, err error) bool {
		require.NoError(t, err)
		got = append(got, v.V)
		return true
	})
	require.Equal(t, []int{0, 1, 2, 3}, got)
}
