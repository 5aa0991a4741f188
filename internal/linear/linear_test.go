package linear_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/linear"
)

// register is the model of a single register: write(v), read() -> v.
var register = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		in := input.([2]int) // {op, value}: op 0 write, 1 read
		if in[0] == 0 {
			return true, in[1]
		}
		return output.(int) == state.(int), state
	},
}

// atomicRegister is a register behind a mutex: linearizable by
// construction.
type atomicRegister struct {
	mu sync.Mutex
	v  int
}

func TestCheckAcceptsALinearizableHistory(t *testing.T) {
	var h linear.History
	var r atomicRegister
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if i%2 == 0 {
					h.Do(c, [2]int{0, c*100 + i}, func() any {
						r.mu.Lock()
						r.v = c*100 + i
						r.mu.Unlock()
						return nil
					})
					continue
				}
				h.Do(c, [2]int{1, 0}, func() any {
					r.mu.Lock()
					defer r.mu.Unlock()
					return r.v
				})
			}
		})
	}
	wg.Wait()
	require.Equal(t, 200, h.Len())
	linear.Check(t, register, &h, 10*time.Second)
}

func TestCheckRejectsAStaleRead(t *testing.T) {
	// write(1) returns, then a read that starts later returns 0.
	var h linear.History
	h.Do(0, [2]int{0, 1}, func() any { return nil })
	h.Do(1, [2]int{1, 0}, func() any { return 0 })
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		linear.Check(ft, register, &h, 10*time.Second)
	}()
	require.True(t, ft.failed, "a stale read is not linearizable")
	require.Contains(t, ft.msg, "not linearizable")
	_, text, ok := strings.Cut(ft.msg, "as text: ")
	require.True(t, ok, ft.msg)
	b, err := os.ReadFile(strings.Fields(text)[0])
	require.NoError(t, err, "the history as text")
	require.Regexp(t, `(?m)^ +\d+ +\d+ client 0 +\[0 1\] -> <nil>\n +\d+ +\d+ client 1 +\[1 0\] -> 0\n$`, string(b))
}

// fakeT records a failure instead of failing the real test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

func TestKeepWritesTheHistoryToLinearOut(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LINEAR_OUT", dir)
	var h linear.History
	h.Do(0, [2]int{0, 1}, func() any { return nil })
	h.Do(1, [2]int{1, 0}, func() any { return linear.Unknown{Err: fmt.Errorf("reset")} })
	linear.Keep(t, register, &h)
	b, err := os.ReadFile(dir + "/" + t.Name() + ".txt")
	require.NoError(t, err, "the history as text, in LINEAR_OUT")
	require.Regexp(t, `(?m)^ +\d+ +\d+ client 0 +\[0 1\] -> <nil>\n +\d+ +\d+ client 1 +\[1 0\] -> unknown \(reset\)\n$`, string(b))
	lines, err := linear.ReadText(dir + "/" + t.Name() + ".txt")
	require.NoError(t, err, "ReadText reads what Keep wrote")
	require.Len(t, lines, 2)
	require.Equal(t, []int{0, 1}, []int{lines[0].Client, lines[1].Client})
	require.Equal(t, []string{"[0 1] -> <nil>", "[1 0] -> unknown (reset)"}, []string{lines[0].Text, lines[1].Text})
	require.LessOrEqual(t, lines[0].Call, lines[0].Return)
}
