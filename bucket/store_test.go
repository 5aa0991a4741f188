package bucket_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// backend opens one implementation of bucket.Store on a fresh database.
type backend struct {
	name string
	open func(t *testing.T, cfg bucket.Config) (bucket.Store[string, reading], *mongo.Database)
}

// backends are the implementations the behaviour tests run against on the
// path p: the bucket store, and the native time-series collection where
// the server has one and p takes it.
func backends(p bucket.Plan) []backend {
	return []backend{
		{"buckets", func(t *testing.T, cfg bucket.Config) (bucket.Store[string, reading], *mongo.Database) {
			return newBuckets(t, p, cfg)
		}},
		{"time-series", func(t *testing.T, cfg bucket.Config) (bucket.Store[string, reading], *mongo.Database) {
			return newTimeSeries(t, p, cfg)
		}},
	}
}

// newTimeSeries returns a time-series store taking the path p on a fresh
// database; it skips the test where there is none.
func newTimeSeries(t *testing.T, p bucket.Plan, cfg bucket.Config) (*bucket.TimeSeries[string, reading], *mongo.Database) {
	t.Helper()
	mongotest.Require(t, patterns.FeatureTimeSeries)
	if p == portable {
		t.Skip("skipped: the portable plan lacks time-series collections (TestTimeSeriesUnsupported covers it)")
	}
	db := mongotest.DB(t)
	s, err := bucket.NewTimeSeries[string, reading](db, timeSeriesConfig(cfg))
	require.NoError(t, err)
	bucket.ForceTimeSeriesPlan(s, p)
	return s, db
}

// series writes n readings of sensor, one every interval from start, half
// with Add and half with AddMany, and returns them.
func series(t *testing.T, s bucket.Store[string, reading], sensor string, start time.Time, interval time.Duration, n int) []reading {
	t.Helper()
	ctx := context.Background()
	var rs []reading
	var batch []bucket.Point[string, reading]
	for i := range n {
		r := readingAt(start.Add(time.Duration(i)*interval), i)
		rs = append(rs, r)
		if i%2 == 0 {
			require.NoError(t, s.Add(ctx, sensor, r))
		} else {
			batch = append(batch, bucket.Point[string, reading]{Meta: sensor, Value: r})
		}
	}
	require.NoError(t, s.AddMany(ctx, batch))
	return rs
}

func TestRange(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		for _, be := range backends(p) {
			t.Run(be.name, func(t *testing.T) {
				ctx := context.Background()
				s, _ := be.open(t, config(7))
				// 50 readings 7 minutes apart: several buckets per hour,
				// written out of order (the odd ones come last, by AddMany).
				rs := series(t, s, "s1", at(0), 7*time.Minute, 50)
				other := series(t, s, "s2", at(0), 7*time.Minute, 5)
				require.Len(t, other, 5)

				tests := []struct {
					name     string
					from, to time.Time
				}{
					{"everything", at(-time.Hour), at(24 * time.Hour)},
					{"from is inclusive, to exclusive", at(14 * time.Minute), at(70 * time.Minute)},
					{"inside one bucket", at(8 * time.Minute), at(20 * time.Minute)},
					{"across windows, unaligned", at(55 * time.Minute), at(3*time.Hour + 30*time.Minute)},
					{"nothing in it", at(10 * time.Hour), at(11 * time.Hour)},
					{"empty interval", at(14 * time.Minute), at(14 * time.Minute)},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						got := utc(collect(t, s.Range(ctx, "s1", tc.from, tc.to)))
						require.Equal(t, inRange(rs, tc.from, tc.to), got)
					})
				}

				t.Run("stopping early", func(t *testing.T) {
					var got []reading
					for r, err := range s.Range(ctx, "s1", at(0), at(24*time.Hour)) {
						require.NoError(t, err)
						if got = append(got, r); len(got) == 3 {
							break
						}
					}
					require.Equal(t, rs[:3], utc(got))
				})
			})
		}
	})
}

func TestSummaries(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		for _, be := range backends(p) {
			t.Run(be.name, func(t *testing.T) {
				ctx := context.Background()
				s, _ := be.open(t, config(5))
				// 60 readings 7 minutes apart (7 hours), plus another sensor
				// that must not be counted.
				rs := series(t, s, "s1", at(0), 7*time.Minute, 60)
				series(t, s, "s2", at(0), 11*time.Minute, 6)

				tests := []struct {
					name     string
					from, to time.Time
					step     time.Duration
				}{
					{"hourly steps on window boundaries", at(0), at(8 * time.Hour), time.Hour},
					{"two-hour steps", at(0), at(8 * time.Hour), 2 * time.Hour},
					{"one step for everything", at(-24 * time.Hour), at(24 * time.Hour), 48 * time.Hour},
					{"steps not aligned with windows", at(30 * time.Minute), at(8 * time.Hour), 90 * time.Minute},
					{"steps smaller than windows", at(0), at(3 * time.Hour), 10 * time.Minute},
					{"from and to inside buckets", at(20 * time.Minute), at(5*time.Hour + 10*time.Minute), time.Hour},
					{"a step of a millisecond", at(14 * time.Minute), at(30 * time.Minute), time.Millisecond},
					{"nothing in it", at(10 * time.Hour), at(20 * time.Hour), time.Hour},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						got := collect(t, s.Summaries(ctx, "s1", tc.from, tc.to, tc.step))
						require.Equal(t, summarise(rs, tc.from, tc.to, tc.step), got)
					})
				}
			})
		}
	})
}

func TestBadInputWritesNothing(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		for _, be := range backends(p) {
			t.Run(be.name, func(t *testing.T) {
				ctx := context.Background()
				s, db := be.open(t, config(10))
				good := readingAt(at(time.Minute), 1)
				withTemp := func(v float64) reading { r := good; r.Temp = v; return r }
				tests := []struct {
					name string
					call func() error
				}{
					{"zero time", func() error { return s.Add(ctx, "s1", reading{Temp: 1}) }},
					{"NaN", func() error { return s.Add(ctx, "s1", withTemp(math.NaN())) }},
					{"+Inf", func() error { return s.Add(ctx, "s1", withTemp(math.Inf(1))) }},
					{"-Inf", func() error { return s.Add(ctx, "s1", withTemp(math.Inf(-1))) }},
					{"one bad point in a batch", func() error {
						return s.AddMany(ctx, []bucket.Point[string, reading]{{Meta: "s1", Value: good}, {Meta: "s1", Value: withTemp(math.NaN())}, {Meta: "s1", Value: good}})
					}},
					{"Range from zero", func() error { return firstErr(s.Range(ctx, "s1", time.Time{}, at(time.Hour))) }},
					{"Range to before from", func() error { return firstErr(s.Range(ctx, "s1", at(time.Hour), at(0))) }},
					{"Summaries step zero", func() error { return firstErr(s.Summaries(ctx, "s1", at(0), at(time.Hour), 0)) }},
					{"Summaries step below a millisecond", func() error {
						return firstErr(s.Summaries(ctx, "s1", at(0), at(time.Hour), time.Millisecond+time.Microsecond))
					}},
					{"Summaries to zero", func() error { return firstErr(s.Summaries(ctx, "s1", at(0), time.Time{}, time.Hour)) }},
					{"DeleteBefore zero", func() error { return s.DeleteBefore(ctx, time.Time{}) }},
					{"DeleteSeriesBefore zero", func() error { return s.DeleteSeriesBefore(ctx, "s1", time.Time{}) }},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						require.ErrorIs(t, tc.call(), patterns.ErrInvalid)
					})
				}
				n, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
				require.NoError(t, err)
				require.Zero(t, n, "nothing was written")
			})
		}
	})
}
