package mongotest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// details holds, per test, the lines Detail kept back.
var details sync.Map // testing.TB -> *detailLog

type detailLog struct {
	mu    sync.Mutex
	lines []string
}

// Detail logs a line of the harness's internals (what a fault case saw,
// how many operations a history held): shown when the test fails, or
// always when MONGOTEST_DETAIL is set; otherwise dropped, so that the
// output of a passing run (./scripts/test runs go test -v) shows the skips
// and the failures, not the workings. Safe for concurrent use.
func Detail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	line := fmt.Sprintf(format, args...)
	if os.Getenv("MONGOTEST_DETAIL") != "" {
		tb.Log(line)
		return
	}
	v, loaded := details.LoadOrStore(tb, &detailLog{})
	d := v.(*detailLog)
	if !loaded {
		tb.Cleanup(func() {
			details.Delete(tb)
			if !tb.Failed() {
				return
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			for _, l := range d.lines {
				tb.Log(l)
			}
		})
	}
	d.mu.Lock()
	d.lines = append(d.lines, line)
	d.mu.Unlock()
}
