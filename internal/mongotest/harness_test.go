package mongotest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingTB is a testing.TB whose Log, Cleanup and Failed are recorded
// and set by the test.
type recordingTB struct {
	testing.TB
	logged   []string
	cleanups []func()
	failed   bool
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Log(args ...any)  { r.logged = append(r.logged, args[0].(string)) }
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool     { return r.failed }
func (r *recordingTB) runCleanups() {
	for _, f := range r.cleanups {
		f()
	}
}

func TestDetailShowsItsLinesOnlyWhenTheTestFails(t *testing.T) {
	t.Setenv("MONGOTEST_DETAIL", "")
	passing := &recordingTB{TB: t}
	Detail(passing, "case %d", 1)
	Detail(passing, "case %d", 2)
	passing.runCleanups()
	require.Empty(t, passing.logged, "a passing test shows nothing")
	require.Len(t, passing.cleanups, 1, "one cleanup per test")

	failing := &recordingTB{TB: t, failed: true}
	Detail(failing, "case %d", 1)
	Detail(failing, "case %d", 2)
	failing.runCleanups()
	require.Equal(t, []string{"case 1", "case 2"}, failing.logged, "a failing test shows every line, in order")

	t.Setenv("MONGOTEST_DETAIL", "1")
	verbose := &recordingTB{TB: t}
	Detail(verbose, "now")
	require.Equal(t, []string{"now"}, verbose.logged, "MONGOTEST_DETAIL shows them at once")
}

// SpeedRatio is the median of the per-pair ratios with an interval that
// holds it, narrows as pairs accrue, and is not moved by one stall.
func TestSpeedRatio(t *testing.T) {
	few := SpeedRatio([]float64{1, 1, 1})
	require.Equal(t, 1.0, few.Center)
	require.True(t, math.IsInf(few.Lo, -1) && math.IsInf(few.Hi, 1), "3 pairs decide nothing: %+v", few)

	var ratios []float64
	for i := range 200 {
		ratios = append(ratios, 0.9+0.002*float64(i%50)) // 0.90 .. 0.998
	}
	ratios[7] = 0.001 // one stall of the library's side
	s := SpeedRatio(ratios)
	require.InDelta(t, 0.95, s.Center, 0.01)
	require.True(t, s.Lo <= s.Center && s.Center <= s.Hi, "%+v", s)
	require.Greater(t, s.Lo, 0.93, "one stall does not widen the interval: %+v", s)
	require.Less(t, s.Hi, 0.97, "%+v", s)
}
