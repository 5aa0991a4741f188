package mongotest_test

import (
	"flag"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestSlope checks the least-squares slope and its extremes over the
// intervals against values worked by hand.
func TestSlope(t *testing.T) {
	sizes := []int{100, 1000, 10000}
	pow := func(e float64) []float64 {
		ts := make([]float64, len(sizes))
		for i, n := range sizes {
			ts[i] = 3 * math.Pow(float64(n), e)
		}
		return ts
	}
	for _, e := range []float64{0, 0.5, 1, 2} {
		c := pow(e)
		s, lo, hi := mongotest.Slope(sizes, c, c, c)
		require.InDelta(t, e, s, 1e-9, "t = 3 n^%v", e)
		require.InDelta(t, e, lo, 1e-9)
		require.InDelta(t, e, hi, 1e-9)
	}
	// Flat medians, each known within a factor 10: the least slope takes
	// the smallest size high and the largest low (the middle one weighs
	// nothing).
	one := []float64{1, 1, 1}
	tenth := []float64{0.1, 0.1, 0.1}
	ten := []float64{10, 10, 10}
	s, lo, hi := mongotest.Slope(sizes, one, tenth, ten)
	require.InDelta(t, 0, s, 1e-9)
	require.InDelta(t, -1, lo, 1e-9, "10 at 10^2 down to 0.1 at 10^4: two decades of time over two of size")
	require.InDelta(t, 1, hi, 1e-9)
	// An interval missing (fewer than 6 runs: ±Inf) leaves that side open.
	s, lo, hi = mongotest.Slope(sizes, one, []float64{math.Inf(-1), 1, 1}, one)
	require.InDelta(t, 0, s, 1e-9)
	require.InDelta(t, 0, lo, 1e-9, "the smallest size pulls the slope down only by being high")
	require.True(t, math.IsInf(hi, 1), "the smallest size low without bound: the slope is unbounded above")
	// One size: no slope.
	s, _, _ = mongotest.Slope([]int{100, 100}, one[:2], one[:2], one[:2])
	require.True(t, math.IsNaN(s))
}

// TestScaling runs Scaling on an operation that sleeps in proportion to
// the size and checks what it reports: the sizes grown in turn, a median
// per size, a slope near 1, the bound, the same metrics again on the
// testing package's second call, and a new measurement on a new run.
func TestScaling(t *testing.T) {
	f := flag.Lookup("test.benchtime")
	old := f.Value.String()
	require.NoError(t, f.Value.Set("10x"))
	t.Cleanup(func() { _ = f.Value.Set(old) })
	var grown [][2]int
	calls := 0
	bench := func(b *testing.B) {
		calls++
		mongotest.Scaling(b, mongotest.Growth{
			Sizes: []int{10, 100, 1000},
			Grow:  func(_ *testing.B, from, to int) { grown = append(grown, [2]int{from, to}) },
			Op: func(_ *testing.B, n int) func(int) {
				return func(int) { time.Sleep(time.Duration(n) * 100 * time.Microsecond) }
			},
			Bound: mongotest.Linear,
		})
	}
	res := testing.Benchmark(bench)
	require.Equal(t, [][2]int{{0, 10}, {10, 100}, {100, 1000}}, grown, "grown once, size after size")
	require.GreaterOrEqual(t, calls, 2, "the testing package calls a benchmark with b.N = 1 first, then again")
	for _, u := range []string{"ns@10", "lo-ns@10", "hi-ns@10", "ns@1000", "slope", "slope-lo", "slope-hi"} {
		require.Contains(t, res.Extra, u)
	}
	require.InDelta(t, 100e6, res.Extra["ns@1000"], 50e6, "100 ms at 1,000")
	require.InDelta(t, 1, res.Extra["slope"], 0.2)
	require.LessOrEqual(t, res.Extra["slope-lo"], res.Extra["slope"])
	require.GreaterOrEqual(t, res.Extra["slope-hi"], res.Extra["slope"])
	require.Equal(t, mongotest.LinearMin, res.Extra["slope-min"])
	require.Equal(t, mongotest.LinearMax, res.Extra["slope-max"])

	// Another run (as -count's) measures again, from its call with b.N = 1.
	grown = nil
	testing.Benchmark(bench)
	require.Equal(t, [][2]int{{0, 10}, {10, 100}, {100, 1000}}, grown, "a new run grows its data again")
}
