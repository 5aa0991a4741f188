package mongotest

import (
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
