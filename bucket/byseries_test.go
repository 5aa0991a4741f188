package bucket_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// bySeries is SummariesBySeries computed the obvious way: per series (in
// the order of their names, which BSON sorts as Go does), the one
// summary of summarise over [from, to).
func bySeries(rs map[string][]reading, from, to time.Time) []bucket.SeriesSummary[string] {
	var out []bucket.SeriesSummary[string]
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range rs {
			if !yield(m) {
				return
			}
		}
	}) {
		for _, s := range summarise(rs[m], from, to, to.Sub(from)) {
			out = append(out, bucket.SeriesSummary[string]{Meta: m, Summary: s})
		}
	}
	return out
}

// TestSummariesBySeries: on random readings of many series, in buckets of
// one and of three (more than 256 buckets, more than a batch of the
// find), over windows whose edges fall inside buckets, SummariesBySeries
// yields what Summaries yields for each series over the whole window and
// what the readings give by hand; on the server path in one aggregate,
// on the client path in one find and its getMores; bad input is
// ErrInvalid with nothing sent, an empty window nothing.
func TestSummariesBySeries(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(23, 3))
		for _, cap := range []int{1, 3} {
			s, db := newBuckets(t, p, config(cap))
			rs := map[string][]reading{}
			var pts []bucket.Point[string, reading]
			for k := range 16 {
				m := fmt.Sprintf("s%02d", k)
				for range 10 + rng.IntN(30) {
					minute := rng.IntN(5 * 60)
					r := readingAt(at(time.Duration(minute)*time.Minute+time.Duration(rng.IntN(60))*time.Second), rng.IntN(1000))
					rs[m] = append(rs[m], r)
					pts = append(pts, bucket.Point[string, reading]{Meta: m, Value: r})
				}
			}
			if cap == 1 {
				require.Greater(t, len(pts), 256, "more buckets than a batch")
			}
			require.NoError(t, s.AddMany(ctx, pts))
			c := mongotest.NewCounter(t, db)
			for range 4 {
				from := at(time.Duration(rng.IntN(4*60)) * time.Minute)
				to := from.Add(time.Duration(1+rng.IntN(3*60)) * time.Minute)
				var got []bucket.SeriesSummary[string]
				sent := c.Count(func() { got = collect(t, s.SummariesBySeries(ctx, from, to)) })
				require.Equal(t, bySeries(rs, from, to), got, "cap %d, [%v, %v)", cap, from, to)
				var each []bucket.SeriesSummary[string]
				for _, m := range slices.Sorted(func(yield func(string) bool) {
					for m := range rs {
						if !yield(m) {
							return
						}
					}
				}) {
					for _, sm := range collect(t, s.Summaries(ctx, m, from, to, to.Sub(from))) {
						each = append(each, bucket.SeriesSummary[string]{Meta: m, Summary: sm})
					}
				}
				require.Equal(t, each, got, "agrees with Summaries series by series")
				if bucket.ServerSummaries(p) {
					require.Equal(t, []string{"aggregate"}, sent)
				} else {
					require.Equal(t, "find", sent[0])
					for _, cmd := range sent[1:] {
						require.Equal(t, "getMore", cmd, "one find, then its getMores: %v", sent)
					}
				}
			}
		}

		s, db := newBuckets(t, p, config(3))
		c := mongotest.NewCounter(t, db)
		sent := c.Count(func() {
			require.ErrorIs(t, firstErr(s.SummariesBySeries(ctx, time.Time{}, at(0))), patterns.ErrInvalid)
			err := firstErr(s.SummariesBySeries(ctx, at(time.Hour), at(0)))
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, "bucket: SummariesBySeries: ")
			require.Empty(t, collect(t, s.SummariesBySeries(ctx, at(0), at(0))))
		})
		require.Empty(t, sent, "nothing sent")
	})
}

// TestSummariesBySeriesReadsLittle: on the client path, one find of the
// buckets; on the server path, one aggregate whatever the window.
func TestSummariesBySeriesReadsLittle(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(5))
		rs := map[string][]reading{
			"a": series(t, s, "a", at(0), 7*time.Minute, 40),
			"b": series(t, s, "b", at(3*time.Minute), 11*time.Minute, 30),
		}
		c := mongotest.NewCounter(t, db)
		var got []bucket.SeriesSummary[string]
		want := []string{"find"}
		if bucket.ServerSummaries(p) {
			want = []string{"aggregate"}
		}
		require.Equal(t, want, c.Count(func() { got = collect(t, s.SummariesBySeries(ctx, at(time.Hour), at(3*time.Hour))) }))
		require.Equal(t, bySeries(rs, at(time.Hour), at(3*time.Hour)), got)
	})
}

// TestTimeSeriesSummariesBySeries: the time-series store yields what
// Summaries yields for each series, in one aggregate.
func TestTimeSeriesSummariesBySeries(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newTimeSeries(t, p, config(5))
		rs := map[string][]reading{}
		for _, m := range []string{"a", "b", "c"} {
			for _, pt := range points(m, 0, 7, 59, 60, 61, 119, 200) {
				rs[m] = append(rs[m], pt.Value)
				require.NoError(t, s.Add(ctx, m, pt.Value))
			}
		}
		c := mongotest.NewCounter(t, db)
		var got []bucket.SeriesSummary[string]
		require.Equal(t, []string{"aggregate"}, c.Count(func() { got = collect(t, s.SummariesBySeries(ctx, at(5*time.Minute), at(2*time.Hour))) }))
		require.Equal(t, bySeries(rs, at(5*time.Minute), at(2*time.Hour)), got)
	})
}

// faultsSummariesBySeries: SummariesBySeries over the 129 buckets of
// s1 and the bucket of s2 with edges inside buckets, broken at each
// command: an error, or every summary right.
func faultsSummariesBySeries(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		from, to := at(7*time.Minute), at(42*time.Hour+31*time.Minute)
		rs := map[string][]reading{}
		for _, pt := range readFixture() {
			rs[pt.Meta] = append(rs[pt.Meta], pt.Value)
		}
		faults.Run(t, faults.New(t), readCase(p, "SummariesBySeries", func(ctx context.Context, s *bucket.Buckets[string, reading]) ([]bucket.SeriesSummary[string], error) {
			return drain(s.SummariesBySeries(ctx, from, to))
		}, bySeries(rs, from, to)))
	})
}

// TestSummariesBySeriesLoneLastSeries: a series whose one bucket comes
// after 256 buckets of another (one an hour, so that the client path has
// counted and yielded them before it reads the last) is yielded: the
// client path once forgot a series it had met only in the bucket that
// made it yield the earlier ones.
func TestSummariesBySeriesLoneLastSeries(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(1))
		rs := map[string][]reading{}
		var docs []any
		add := func(m string, i int) {
			r := readingAt(at(time.Duration(i)*time.Hour+time.Duration(i%60)*time.Minute), i)
			rs[m] = append(rs[m], r)
			docs = append(docs, readyBuckets([]bucket.Point[string, reading]{{Meta: m, Value: r}})...)
		}
		for i := range 256 {
			add("a", i)
		}
		add("b", 255)
		_, err := db.Collection("readings").InsertMany(ctx, docs)
		require.NoError(t, err)
		from, to := at(0), at(256*time.Hour)
		require.Equal(t, bySeries(rs, from, to), collect(t, s.SummariesBySeries(ctx, from, to)))
	})
}

// TestSummariesBySeriesEqualMetas: metas that the server compares equal
// (numbers of the four types by value, -0 and 0, the NaNs, embedded
// documents with such numbers) are one series on both paths, as they are
// to Add's upserts, Latest and Summaries; metas that differ, however
// little (2^53 and 2^53+1, a number and a string), are two. Each row's
// metas are stored in buckets of their own (one an hour); the rows are in
// the order the server sorts them, and a merged series reports one of
// its metas. A meta the server does not store (FerretDB 1.x closes the
// connection on a decimal) is left out.
func TestSummariesBySeriesEqualMetas(t *testing.T) {
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		require.NoError(t, err)
		return d
	}
	rows := [][]any{
		{math.NaN(), dec("NaN")},
		{math.Copysign(0, -1), int32(0), dec("-0"), int64(0)},
		{int32(7), 7.0, int64(7), dec("7.00")},
		{float64(1 << 53), int64(1 << 53), dec("9007199254740992")},
		{int64(1<<53 + 1), dec("9007199254740993")},
		{math.MaxFloat64},
		{dec("1E+400"), dec("10E+399")},
		{"7"},
		{bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: 2.5}}, bson.D{{Key: "a", Value: 1.0}, {Key: "b", Value: dec("2.50")}}},
	}
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		s, err := bucket.New[any, reading](db, config(1))
		require.NoError(t, err)
		bucket.ForcePlan(s, p)
		require.NoError(t, patterns.EnsureIndexes(ctx, s.Indexes()...))
		type series struct {
			metas []bson.RawValue
			rs    []reading
		}
		var want []series
		hour := 0
		for _, row := range rows {
			var got series
			for _, m := range row {
				r := readingAt(at(time.Duration(hour)*time.Hour+time.Minute), hour)
				hour++
				_, err := db.Collection("readings").InsertMany(ctx, readyBuckets([]bucket.Point[any, reading]{{Meta: m, Value: r}}))
				if mongo.IsNetworkError(err) {
					mongotest.Detail(t, "meta %v left out: the server does not store it (%v)", m, err)
					continue
				}
				require.NoError(t, err)
				typ, v, err := bson.MarshalValue(m)
				require.NoError(t, err)
				got.metas = append(got.metas, bson.RawValue{Type: typ, Value: v})
				got.rs = append(got.rs, r)
			}
			if len(got.rs) > 0 {
				want = append(want, got)
			}
		}
		from, to := at(0), at(time.Duration(hour)*time.Hour)
		sums := collect(t, s.SummariesBySeries(ctx, from, to))
		require.Len(t, sums, len(want), "one series per row")
		for i, w := range want {
			require.Equal(t, summarise(w.rs, from, to, to.Sub(from)), []bucket.Summary{sums[i].Summary}, "row %d", i)
			typ, v, err := bson.MarshalValue(sums[i].Meta)
			require.NoError(t, err)
			require.True(t, slices.ContainsFunc(w.metas, func(m bson.RawValue) bool {
				return m.Type == typ && bsonid.Equal(m, bson.RawValue{Type: typ, Value: v})
			}), "row %d: meta %v is one of the series' own (FerretDB 1.x stores -0 as 0)", i, sums[i].Meta)
		}
	})
}
