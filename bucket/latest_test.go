package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestLatest: Latest returns the newest reading of a series, whatever
// order the readings arrived in and whichever bucket of the newest window
// holds it: one find when the newest window holds one bucket, two when it
// holds several (here the newest reading is in the older of two); a
// series without readings is ErrNotFound, a bad meta ErrInvalid with
// nothing sent.
func TestLatest(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(4))
		c := mongotest.NewCounter(t, db)

		_, err := s.Latest(ctx, "s1")
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.EqualError(t, err, `bucket: Latest: series "s1": no measurement: not found`)

		// s1: three windows; the newest holds one bucket, and a late
		// reading of an older window arrives last.
		require.NoError(t, s.AddMany(ctx, points("s1", 0, 1, 61, 130, 125)))
		require.NoError(t, s.AddMany(ctx, points("s1", 62)))
		var got bucket.Point[string, reading]
		sent := c.Count(func() { got.Value, err = s.Latest(ctx, "s1") })
		require.NoError(t, err)
		require.Equal(t, points("s1", 130)[0].Value, utc([]reading{got.Value})[0])
		require.Equal(t, []string{"find"}, sent, "the newest window holds one bucket")

		// s2: the newest window holds two buckets, the newest reading in
		// the first one opened.
		require.NoError(t, s.AddMany(ctx, points("s2", 1, 2, 3, 50)))
		require.NoError(t, s.AddMany(ctx, points("s2", 10)))
		sent = c.Count(func() { got.Value, err = s.Latest(ctx, "s2") })
		require.NoError(t, err)
		require.Equal(t, points("s2", 50)[0].Value, utc([]reading{got.Value})[0])
		require.Equal(t, []string{"find", "find"}, sent, "the newest window holds two buckets")

		sent = c.Count(func() { _, err = s.Latest(ctx, "s3") })
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.Equal(t, []string{"find"}, sent)

		bad, err := bucket.New[map[string]any, reading](db, config(4))
		require.NoError(t, err)
		sent = c.Count(func() { _, err = bad.Latest(ctx, map[string]any{"$ne": nil}) })
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.Empty(t, sent, "nothing sent")
	})
}

// TestLatestMatchesRange: on many windows of buckets of four, Latest is
// the last reading Range yields.
func TestLatestMatchesRange(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, _ := newBuckets(t, p, config(4))
		require.NoError(t, s.AddMany(ctx, readFixture()))
		all := collect(t, s.Range(ctx, "s1", at(0), at(48*time.Hour)))
		got, err := s.Latest(ctx, "s1")
		require.NoError(t, err)
		require.Equal(t, utc(all)[len(all)-1], utc([]reading{got})[0])
	})
}
