package mongotest

import (
	"math"
	"runtime"
	"testing"
	"time"

	"golang.org/x/perf/benchmath"
)

// Comparison is a benchmark of a repository's operation against the same
// work written by hand with the driver (the baseline), for [Compare].
//
// Library and Baseline each prepare their side, on fresh data of their
// own (each in its own [DB], seeded identically), and return the
// operation to time: op(i) does the i-th unit of the work, the same for
// both sides, for i from 0 to the number of pairs less one (b.N, or
// [MinPairs] when Compare runs more: data seeded for b.N operations must
// take that many). The two sides are timed interleaved, one operation each in
// turn (in alternating order), so that the state of the machine and of
// the server drifts alike for both.
type Comparison struct {
	Library  func(b *testing.B) (op func(i int))
	Baseline func(b *testing.B) (op func(i int))

	// Speed is the goal for speed-x, the library's operations per second
	// over the baseline's (at least this); 0: no goal.
	Speed float64
	// Allocs is the goal for allocs-x, the library's allocations per
	// operation over the baseline's (at most this); 0: no goal.
	Allocs float64
}

// Compare runs c.Library and c.Baseline interleaved b.N times each (at
// least [MinPairs] times when -benchtime is a duration) and reports:
//
//	ns/op, allocs/op, B/op       per pair (the testing package's, divided by the pairs
//	                             run when Compare ran more than b.N)
//
//	lib-ns/op, base-ns/op        mean time of one operation on each side
//	speed-x                      the median over the pairs of base time / lib time:
//	                             >1, the library is faster
//	speed-lo-x, speed-hi-x       its 95% confidence interval (benchmath's, as
//	                             benchstat's, assuming nothing of the distribution;
//	                             not reported below 6 pairs, which decide nothing)
//	lib-allocs/op, base-allocs/op and allocs-x (lib / base, of the totals)
//	speed-goal-x, allocs-goal-x  the goals, when set
//
// The ratio is taken per pair, the two operations that ran one after the
// other, so that a stall of the server or the machine (which on a busy
// 2-core machine decided a ratio of means: one 2 s stall in 20 pairs) moves
// one pair's ratio, not the result. scripts/bench reads these metrics and
// prints the goal table: met when the interval lies at or above a speed
// goal, missed when below, undecided when it straddles it (run longer).
// Allocations are counted from the runtime's totals around each
// operation, so they include the driver's background work that happens
// to run meanwhile (noise of a few allocations per operation).
func Compare(b *testing.B, c Comparison) {
	b.Helper()
	lib, base := c.Library(b), c.Baseline(b)
	var libT, baseT time.Duration
	var libA, baseA uint64
	ratios := make([]float64, 0, b.N)
	var ms runtime.MemStats
	run := func(op func(int), i int, t *time.Duration, a *uint64) time.Duration {
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		op(i)
		d := time.Since(start)
		*t += d
		runtime.ReadMemStats(&ms)
		*a += ms.Mallocs - before
		return d
	}
	pairs := b.N
	runs, _ := benchBudget()
	b.ResetTimer()
	runtime.ReadMemStats(&ms)
	startMallocs, startBytes := ms.Mallocs, ms.TotalAlloc
	for i := 0; i < pairs; i++ {
		var l, r time.Duration
		if i%2 == 0 {
			l = run(lib, i, &libT, &libA)
			r = run(base, i, &baseT, &baseA)
		} else {
			r = run(base, i, &baseT, &baseA)
			l = run(lib, i, &libT, &libA)
		}
		ratios = append(ratios, float64(max(r, 1))/float64(max(l, 1)))
		if i == pairs-1 && pairs < MinPairs && runs == 0 && b.Elapsed() >= benchDuration() {
			// The testing package's last call (its time is up) with
			// too few pairs to decide: a slow operation. Run more.
			pairs = MinPairs
		}
	}
	b.StopTimer()
	n := float64(pairs)
	if pairs != b.N {
		// The testing package divides what it measured by b.N: say it
		// per pair instead.
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/op")
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.Mallocs-startMallocs)/n, "allocs/op")
		b.ReportMetric(float64(ms.TotalAlloc-startBytes)/n, "B/op")
	}
	speed := SpeedRatio(ratios)
	b.ReportMetric(float64(libT.Nanoseconds())/n, "lib-ns/op")
	b.ReportMetric(float64(baseT.Nanoseconds())/n, "base-ns/op")
	b.ReportMetric(speed.Center, "speed-x")
	if !math.IsInf(speed.Lo, 0) && !math.IsInf(speed.Hi, 0) {
		b.ReportMetric(speed.Lo, "speed-lo-x")
		b.ReportMetric(speed.Hi, "speed-hi-x")
	}
	b.ReportMetric(float64(libA)/n, "lib-allocs/op")
	b.ReportMetric(float64(baseA)/n, "base-allocs/op")
	if baseA > 0 {
		b.ReportMetric(float64(libA)/float64(baseA), "allocs-x")
	}
	if c.Speed > 0 {
		b.ReportMetric(c.Speed, "speed-goal-x")
	}
	if c.Allocs > 0 {
		b.ReportMetric(c.Allocs, "allocs-goal-x")
	}
}

// MinPairs is the fewest pairs [Compare] times when -benchtime is a
// duration: an operation so slow that the time is up before it (a pair of
// MigrateAll takes seconds on FerretDB 2) runs that many pairs anyway, so
// that its ratio has an interval narrow enough to decide (below 6 pairs it
// has none). -benchtime Nx runs N pairs, as asked.
const MinPairs = 10

// SpeedRatio summarizes per-pair speed ratios (baseline time over library
// time): their median and its 95% confidence interval, with benchmath
// (golang.org/x/perf, the statistics benchstat uses), which assumes
// nothing of their distribution. Below 6 ratios the interval is ±Inf.
func SpeedRatio(ratios []float64) benchmath.Summary {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(ratios, &benchmath.DefaultThresholds), 0.95)
}
