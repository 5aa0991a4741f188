package mongotest_test

// Attack on d844a6e: Compare runs at least MinPairs pairs when -benchtime
// is a duration and the testing package's time is up, and reports ns/op
// as the mean time of a pair.

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// atk61Benchtime sets -test.benchtime for the test.
func atk61Benchtime(t *testing.T, v string) {
	old := flag.Lookup("test.benchtime").Value.String()
	t.Cleanup(func() { require.NoError(t, flag.Set("test.benchtime", old)) })
	require.NoError(t, flag.Set("test.benchtime", v))
}

// atk61Calls records, per call of the benchmark function, b.N and the
// indexes op was called with on each side.
type atk61Calls struct {
	n        []int
	lib, bas [][]int
}

func (c *atk61Calls) compare(b *testing.B, op func(b *testing.B, i int)) {
	c.n = append(c.n, b.N)
	c.lib, c.bas = append(c.lib, nil), append(c.bas, nil)
	k := len(c.n) - 1
	side := func(rec *[][]int) func(*testing.B) func(int) {
		return func(b *testing.B) func(int) {
			return func(i int) { (*rec)[k] = append((*rec)[k], i); op(b, i) }
		}
	}
	mongotest.Compare(b, mongotest.Comparison{Library: side(&c.lib), Baseline: side(&c.bas), Speed: 0.5})
}

func (c *atk61Calls) last() (n int, lib, bas []int) {
	k := len(c.n) - 1
	return c.n[k], c.lib[k], c.bas[k]
}

func atk61Seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestAttack61CompareMinPairsShapes: with -benchtime a duration, the
// testing package's last call runs at least MinPairs pairs, each i once
// per side, whether the time is up at b.N = 1 or after the ramp (pair
// 30 ms, -benchtime 50 ms, 100 ms, 250 ms), at top level and inside b.Run.
func TestAttack61CompareMinPairsShapes(t *testing.T) {
	for _, bt := range []string{"50ms", "100ms", "250ms"} {
		for _, sub := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sub=%v", bt, sub), func(t *testing.T) {
				atk61Benchtime(t, bt)
				var c atk61Calls
				op := func(*testing.B, int) { time.Sleep(15 * time.Millisecond) }
				var res testing.BenchmarkResult
				var subRes testing.BenchmarkResult
				res = testing.Benchmark(func(b *testing.B) {
					if !sub {
						c.compare(b, op)
						return
					}
					b.Run("inner", func(b *testing.B) {
						c.compare(b, op)
						subRes = testing.BenchmarkResult{N: b.N}
					})
				})
				_ = subRes
				n, lib, bas := c.last()
				t.Logf("b.N per call %v; last call: %d pairs; result N %d, ns/op %v", c.n, len(lib), res.N, res.NsPerOp())
				require.GreaterOrEqual(t, len(lib), mongotest.MinPairs, "b.N per call %v", c.n)
				require.Equal(t, atk61Seq(max(n, len(lib))), lib)
				require.Equal(t, lib, bas)
				if !sub {
					require.InDelta(t, 30e6, res.Extra["ns/op"], 15e6)
				}
			})
		}
	}
}

// TestAttack61CompareCountRunsNPairs: -benchtime Nx runs N pairs,
// however slow (1x: the testing package's first call only).
func TestAttack61CompareCountRunsNPairs(t *testing.T) {
	for _, bt := range []struct {
		flag  string
		pairs int
	}{{"1x", 1}, {"2x", 2}, {"12x", 12}} {
		atk61Benchtime(t, bt.flag)
		var c atk61Calls
		testing.Benchmark(func(b *testing.B) {
			c.compare(b, func(*testing.B, int) { time.Sleep(20 * time.Millisecond) })
		})
		_, lib, bas := c.last()
		require.Len(t, lib, bt.pairs, bt.flag)
		require.Len(t, bas, bt.pairs, bt.flag)
	}
}

var atk61Sink []*[64]byte

// TestAttack61CompareBuiltinMemPerPair: with -benchmem (or ReportAllocs),
// the testing package prints allocs/op and B/op beside Compare's ns/op
// (the mean of a pair). Once Compare extends a call past b.N (b.N = 1,
// MinPairs pairs run), the testing package divides the call's allocations
// by b.N: allocs/op is MinPairs pairs' worth, while ns/op is one pair's.
// Each op allocates 100 objects: a pair 200.
func TestAttack61CompareBuiltinMemPerPair(t *testing.T) {
	atk61Benchtime(t, "30ms")
	var c atk61Calls
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		c.compare(b, func(*testing.B, int) {
			for range 100 {
				atk61Sink = append(atk61Sink, new([64]byte))
			}
			atk61Sink = atk61Sink[:0]
			time.Sleep(20 * time.Millisecond)
		})
	})
	_, lib, _ := c.last()
	perPair := res.Extra["lib-allocs/op"] + res.Extra["base-allocs/op"]
	t.Logf("N %d, pairs %d; ns/op %.0f (a pair); allocs/op %d, B/op %d; lib+base allocs/op %.0f; %s %s",
		res.N, len(lib), res.Extra["ns/op"], res.AllocsPerOp(), res.AllocedBytesPerOp(), perPair, res.String(), res.MemString())
	require.InDelta(t, perPair, float64(res.AllocsPerOp()), perPair/2,
		"allocs/op printed beside ns/op (one pair's) counts %d pairs", len(lib))
}

// TestAttack61CompareNsPerOpHonoursStopTimer: an op that stops the timer
// for work it does not want measured (testing.B.StopTimer: "pause the
// timer while performing steps that you don't want to measure"). Before
// d844a6e ns/op was the testing package's, without the paused time; now
// Compare overrides it with its own clock around op, which counts it.
// Pair: 2 x (20 ms paused + 5 ms timed).
func TestAttack61CompareNsPerOpHonoursStopTimer(t *testing.T) {
	atk61Benchtime(t, "100ms")
	var c atk61Calls
	res := testing.Benchmark(func(b *testing.B) {
		c.compare(b, func(b *testing.B, _ int) {
			b.StopTimer()
			time.Sleep(20 * time.Millisecond)
			b.StartTimer()
			time.Sleep(5 * time.Millisecond)
		})
	})
	_, lib, _ := c.last()
	t.Logf("N %d, pairs %d, T %v: timed per pair %v; ns/op %d", res.N, len(lib), res.T, res.T/time.Duration(len(lib)), res.NsPerOp())
	require.InDelta(t, 10e6, float64(res.NsPerOp()), 5e6, "ns/op: the timed part of a pair, as the testing package measures it")
}
