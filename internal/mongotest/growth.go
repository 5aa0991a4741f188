package mongotest

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Bound is what a [Growth]'s slope must stay within: the slope of time
// against the size of the data on log-log axes (0: the time does not
// grow with the data; 1: it grows in proportion).
type Bound int

const (
	// Flat bounds a hot path, which must find what it needs through an
	// index: slope at most [FlatMax].
	Flat Bound = iota + 1
	// Linear bounds a scan, whose time grows in proportion to what it
	// reads: slope within [LinearMin, LinearMax]. Its sizes must start
	// where the time of what it reads outweighs the call's fixed cost
	// (a + b·n has slope b·n/(a+b·n) on log-log axes, below 0.5 while
	// b·n < a).
	Linear
)

// The bounds of the slopes, as scripts/bench checks them.
const (
	FlatMax   = 0.2
	LinearMin = 0.8
	LinearMax = 1.2
)

// Growth is a benchmark of how one operation's time grows with the size of
// its data, for [Scaling].
type Growth struct {
	// Sizes are the sizes of the data to measure at, ascending, in
	// documents (or items of one parent, as the benchmark says); nil:
	// [GrowthSizes].
	Sizes []int
	// Grow brings the data from size from to size to (from is 0 the first
	// time): the data grows between sizes, in the same database, in large
	// batches ([InsertN]).
	Grow func(b *testing.B, from, to int)
	// Op returns the operation to time at size n: op(i) does the i-th
	// unit of the work.
	Op func(b *testing.B, n int) (op func(i int))
	// Bound is the slope's bound.
	Bound Bound
	// Writes marks an operation that writes with guarded updates (filters
	// beyond _id). It is not measured on a server without
	// patterns.FeatureConcurrentUpdates (FerretDB 1.x), whose guarded
	// writes scan the collection. At size n it runs at most n/2 times
	// (at least 10), so that its own writes do not move the size far.
	Writes bool
}

// GrowthSizes returns the sizes a [Growth] is measured at by default:
// 10^2, 10^3 and 10^4, and 10^5 too with MONGOPATTERNS_SOAK set (growing
// the data to 10^5 takes minutes on a busy machine).
func GrowthSizes() []int {
	if os.Getenv("MONGOPATTERNS_SOAK") != "" {
		return []int{100, 1000, 10000, 100000}
	}
	return []int{100, 1000, 10000}
}

// scalingRuns keeps each Scaling benchmark's metrics, so that the testing
// package's later calls of the same benchmark with a larger b.N report
// them again instead of growing the data again. A call with b.N = 1 starts
// a measurement: each of -count's runs begins with one.
var scalingRuns sync.Map // b.Name() -> []metric

type metric struct {
	v    float64
	unit string
}

// Scaling measures g.Op at each of g's sizes, growing the data in between,
// and reports:
//
//	ns@<n>, lo-ns@<n>, hi-ns@<n>  the median time of one operation at size n and its
//	                              95% confidence interval (benchmath's, assuming
//	                              nothing of the distribution; absent below 6 runs)
//	slope, slope-lo, slope-hi     the least-squares slope of log time against log size
//	                              over the medians ([Slope]), and its least and
//	                              greatest value over the medians' intervals
//	slope-max, slope-min          the bound (slope-min for Linear only)
//	unmeasured                    1, when the server cannot measure the operation
//	                              (g.Writes on a server without concurrent updates)
//
// At each size the operation runs for -benchtime (a duration: until it has
// elapsed, at least 10 times; a count "Nx": N times), whatever b.N: the
// data is grown once per run (each of -count's) and the testing package's
// later calls of the benchmark with larger b.N report the same metrics. scripts/bench reads these
// metrics and prints the scaling table with a verdict per row: met when
// [slope-lo, slope-hi] lies within the bound, MISSED when it lies outside,
// undecided when it straddles it (run longer).
func Scaling(b *testing.B, g Growth) {
	b.Helper()
	if ms, ok := scalingRuns.Load(b.Name()); ok && b.N > 1 {
		for _, m := range ms.([]metric) {
			b.ReportMetric(m.v, m.unit)
		}
		return
	}
	var ms []metric
	report := func(v float64, unit string) {
		ms = append(ms, metric{v, unit})
		b.ReportMetric(v, unit)
	}
	defer func() { scalingRuns.Store(b.Name(), ms) }()
	if g.Writes && !Server().Has(patterns.FeatureConcurrentUpdates) {
		report(1, "unmeasured")
		return
	}
	sizes := g.Sizes
	if sizes == nil {
		sizes = GrowthSizes()
	}
	runs, budget := benchBudget()
	center := make([]float64, len(sizes))
	lo := make([]float64, len(sizes))
	hi := make([]float64, len(sizes))
	from := 0
	for k, n := range sizes {
		b.StopTimer()
		g.Grow(b, from, n)
		from = n
		op := g.Op(b, n)
		b.StartTimer()
		limit := math.MaxInt
		if g.Writes {
			limit = max(n/2, 10)
		}
		var times []float64
		start := time.Now()
		for i := 0; i < limit; i++ {
			if runs > 0 && i >= runs || runs == 0 && i >= 10 && time.Since(start) >= budget {
				break
			}
			t := time.Now()
			op(i)
			times = append(times, float64(time.Since(t).Nanoseconds()))
		}
		s := SpeedRatio(times) // the median and its interval: the same statistics
		center[k], lo[k], hi[k] = s.Center, s.Lo, s.Hi
		report(s.Center, fmt.Sprintf("ns@%d", n))
		if !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) {
			report(s.Lo, fmt.Sprintf("lo-ns@%d", n))
			report(s.Hi, fmt.Sprintf("hi-ns@%d", n))
		}
	}
	s, sLo, sHi := Slope(sizes, center, lo, hi)
	report(s, "slope")
	if !math.IsInf(sLo, 0) && !math.IsInf(sHi, 0) {
		report(sLo, "slope-lo")
		report(sHi, "slope-hi")
	}
	switch g.Bound {
	case Flat:
		report(FlatMax, "slope-max")
	case Linear:
		report(LinearMin, "slope-min")
		report(LinearMax, "slope-max")
	}
}

// benchBudget returns -benchtime: a count of runs (and 0), or 0 and a
// duration (1 s when the flag is absent).
func benchBudget() (int, time.Duration) {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 0, time.Second
	}
	v := f.Value.String()
	if n, ok := strings.CutSuffix(v, "x"); ok {
		if c, err := strconv.Atoi(n); err == nil && c > 0 {
			return c, 0
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return 0, d
	}
	return 0, time.Second
}

// benchDuration is -benchtime as a duration: 1 s when it is absent or a
// count of runs.
func benchDuration() time.Duration {
	if _, d := benchBudget(); d > 0 {
		return d
	}
	return time.Second
}

// Slope fits log t = a + s·log n by least squares over the points
// (sizes[i], center[i]) and returns s, and its least and greatest value
// when each t is anywhere within [lo[i], hi[i]]. The fitted slope is a
// weighted sum of the log times, with weight (log n - mean log n) / Σ(log n
// - mean)², so its extremes take each t at the end of its interval that
// the weight's sign calls for. A bound that is not a positive finite time
// makes that extreme infinite; fewer than two distinct sizes, NaN.
func Slope(sizes []int, center, lo, hi []float64) (s, sLo, sHi float64) {
	var mean float64
	for _, n := range sizes {
		mean += math.Log(float64(n))
	}
	mean /= float64(len(sizes))
	var sxx float64
	for _, n := range sizes {
		d := math.Log(float64(n)) - mean
		sxx += d * d
	}
	if sxx == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	logOf := func(t, inf float64) float64 {
		if t <= 0 || math.IsInf(t, 0) || math.IsNaN(t) {
			return inf
		}
		return math.Log(t)
	}
	for i, n := range sizes {
		w := (math.Log(float64(n)) - mean) / sxx
		s += w * math.Log(center[i])
		low, high := logOf(lo[i], math.Inf(-1)), logOf(hi[i], math.Inf(1))
		if w < 0 {
			low, high = high, low
		}
		if w != 0 {
			sLo += w * low
			sHi += w * high
		}
	}
	return s, sLo, sHi
}

// InsertN inserts the documents doc(from) ... doc(to-1) into coll, in
// unordered batches of 1,000: how a [Growth] grows its data.
func InsertN(tb testing.TB, coll *mongo.Collection, from, to int, doc func(i int) any) {
	tb.Helper()
	const batch = 1000
	for i := from; i < to; i += batch {
		docs := make([]any, 0, min(batch, to-i))
		for j := i; j < min(i+batch, to); j++ {
			docs = append(docs, doc(j))
		}
		if _, err := coll.InsertMany(context.Background(), docs, options.InsertMany().SetOrdered(false)); err != nil {
			tb.Fatalf("mongotest: InsertN %s [%d, %d): %v", coll.Name(), i, i+len(docs), err)
		}
	}
}
