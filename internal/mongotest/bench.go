package mongotest

import (
	"runtime"
	"testing"
	"time"
)

// Comparison is a benchmark of a repository's operation against the same
// work written by hand with the driver (the baseline), for [Compare].
//
// Library and Baseline each prepare their side, on fresh data of their
// own (each in its own [DB], seeded identically), and return the
// operation to time: op(i) does the i-th unit of the work, the same for
// both sides. The two sides are timed interleaved, one operation each in
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

// Compare runs c.Library and c.Baseline interleaved b.N times each and
// reports, besides the usual ns/op (of the pair):
//
//	lib-ns/op, base-ns/op        time of one operation on each side
//	speed-x                      base-ns/op / lib-ns/op: >1, the library is faster
//	lib-allocs/op, base-allocs/op and allocs-x (lib / base)
//	speed-goal-x, allocs-goal-x  the goals, when set
//
// scripts/bench reads these metrics and prints the goal table.
// Allocations are counted from the runtime's totals around each
// operation, so they include the driver's background work that happens
// to run meanwhile (noise of a few allocations per operation).
func Compare(b *testing.B, c Comparison) {
	b.Helper()
	lib, base := c.Library(b), c.Baseline(b)
	var libT, baseT time.Duration
	var libA, baseA uint64
	var ms runtime.MemStats
	run := func(op func(int), i int, t *time.Duration, a *uint64) {
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		op(i)
		*t += time.Since(start)
		runtime.ReadMemStats(&ms)
		*a += ms.Mallocs - before
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			run(lib, i, &libT, &libA)
			run(base, i, &baseT, &baseA)
		} else {
			run(base, i, &baseT, &baseA)
			run(lib, i, &libT, &libA)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(libT.Nanoseconds())/n, "lib-ns/op")
	b.ReportMetric(float64(baseT.Nanoseconds())/n, "base-ns/op")
	b.ReportMetric(float64(baseT)/float64(libT), "speed-x")
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
