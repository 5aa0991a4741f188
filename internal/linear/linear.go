// Package linear records concurrent histories of a repository's
// operations and checks them for linearizability against a sequential
// model of what the repository promises, with porcupine
// (github.com/anishathalye/porcupine): the check etcd's tests use.
//
// A test starts several goroutines that call the repository through
// [History.Do], each with its own client id, then calls [Check] with a
// model whose Step function says which outputs the promised behaviour
// allows for an input in a state. A promise weaker than linearizable (a
// reader may see one collection ahead of another) is encoded in the model
// as exactly that weakness: a Step that accepts the outputs the
// documentation allows, no others.
package linear

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// History is a concurrent history being recorded. The zero value is
// ready; it is safe for concurrent use.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// Unknown is the output of an operation whose outcome the caller cannot
// know: a fault broke its connection, or its deadline passed, after it
// may have sent a write. [History.Do] records its return at infinity, as
// porcupine allows: the operation may take effect at any point after its
// call, or never, and the model's Step must accept Unknown either way
// (the write applied, or not: two steps of the search).
type Unknown struct{ Err error }

func (u Unknown) String() string { return "unknown (" + u.Err.Error() + ")" }

// Do runs call as one operation of client with the given input, recording
// when it was invoked and when it returned, with its output. Operations
// whose outcome is unknown (an error that leaves it unsure whether a write
// happened) must be recorded with an output that the model accepts either
// way, or as [Unknown], whose return is at infinity.
func (h *History) Do(client int, input any, call func() (output any)) {
	h.mu.Lock()
	if h.start.IsZero() {
		h.start = time.Now()
	}
	start := h.start
	h.mu.Unlock()
	invoked := time.Since(start).Nanoseconds()
	out := call()
	returned := time.Since(start).Nanoseconds()
	if _, ok := out.(Unknown); ok {
		returned = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: input, Call: invoked, Output: out, Return: returned})
	h.mu.Unlock()
}

// Operations returns the operations recorded so far, in the order they
// returned (an [Unknown] one when its call ended).
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Len returns the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check fails the test unless the recorded history is linearizable with
// respect to model: some order of the operations, consistent with their
// real-time order, that the model accepts step by step. When it is not,
// it writes porcupine's visualization of the history to a file in the
// test's output directory and names it. A check that exceeds timeout
// fails too (an unknown result proves nothing).
func Check(t testing.TB, model porcupine.Model, h *History, timeout time.Duration) {
	t.Helper()
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		mongotest.Detail(t, "linearizable: %d operations", len(ops))
	case porcupine.Unknown:
		t.Fatalf("the linearizability check of %d operations did not finish within %s", len(ops), timeout)
	default:
		dir := outDir(t)
		path := filepath.Join(dir, filepath.Base(t.Name())+".html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Logf("visualize: %v", err)
		}
		text := writeText(t, dir, model, ops)
		t.Fatalf("the history of %d operations is not linearizable; visualization: %s, as text: %s (set LINEAR_OUT to keep them)", len(ops), path, text)
	}
}

// Keep writes the history as text (see [Check]) to the test's output
// directory (LINEAR_OUT when set) and logs its path: for a history that
// linearizes but whose state at rest a later check refuses, so that it
// can be replayed against the model.
func Keep(t testing.TB, model porcupine.Model, h *History) {
	t.Helper()
	t.Logf("the history as text: %s", writeText(t, outDir(t), model, h.Operations()))
}

func outDir(t testing.TB) string {
	if d := os.Getenv("LINEAR_OUT"); d != "" {
		return d
	}
	return t.TempDir()
}

func writeText(t testing.TB, dir string, model porcupine.Model, ops []porcupine.Operation) string {
	text := filepath.Join(dir, filepath.Base(t.Name())+".txt")
	if err := os.WriteFile(text, historyText(model, ops), 0o644); err != nil {
		t.Logf("history: %v", err)
	}
	return text
}

// historyText is the history as text, one operation a line in the order
// of their calls: call and return times in microseconds, the client and
// the model's description of the operation (input -> output without
// one). It shows what the
// visualization shows, where a browser is not at hand (grep for the
// reads around the one no linearization explains).
func historyText(model porcupine.Model, ops []porcupine.Operation) []byte {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	describe := model.DescribeOperation
	if describe == nil {
		describe = func(in, out any) string { return fmt.Sprintf("%v -> %v", in, out) }
	}
	var b strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&b, "%10d %10d client %-3d %s\n", o.Call/1000, o.Return/1000, o.ClientId, describe(o.Input, o.Output))
	}
	return []byte(b.String())
}

// Line is one operation of a history as text (see [Check]): its call
// and return times in microseconds, its client, and the model's
// description of it.
type Line struct {
	Call, Return int64
	Client       int
	Text         string
}

// lineRE reads a line of historyText.
var lineRE = regexp.MustCompile(`^\s*(\d+)\s+(\d+) client (\d+)\s+(.*)$`)

// ReadText reads a history that [Check] or [Keep] wrote as text.
func ReadText(path string) ([]Line, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []Line
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("linear: %s: not a line of a history: %q", path, l)
		}
		call, _ := strconv.ParseInt(m[1], 10, 64)
		ret, _ := strconv.ParseInt(m[2], 10, 64)
		client, _ := strconv.Atoi(m[3])
		lines = append(lines, Line{Call: call, Return: ret, Client: client, Text: m[4]})
	}
	return lines, nil
}

// Replay replays against model the history in the file that the
// REPLAY environment variable names (a soak keeps one per violation with
// LINEAR_OUT=<dir>: seed_<seed>.txt, see [Keep]) and logs what [Explain]
// says of it; without REPLAY it skips t. parse reads a line's text (the
// model's description of the operation) into the operation's input and
// the text of its outcome; output reads an outcome, but one of unknown
// outcome ("unknown ..."), which Replay reads as [Unknown], returning at
// infinity, as [Check] records it. It sends nothing to a server.
func Replay(t testing.TB, model porcupine.Model, parse func(text string) (input any, outcome string), output func(outcome string) any) {
	t.Helper()
	path := os.Getenv("REPLAY")
	if path == "" {
		t.Skip("skipped: set REPLAY to a history's .txt")
	}
	lines, err := ReadText(path)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]porcupine.Operation, 0, len(lines))
	for _, l := range lines {
		in, outcome := parse(l.Text)
		o := porcupine.Operation{ClientId: l.Client, Call: l.Call, Return: l.Return, Input: in}
		if strings.HasPrefix(outcome, "unknown") {
			o.Output, o.Return = Unknown{Err: errors.New(outcome)}, math.MaxInt64
		} else {
			o.Output = output(outcome)
		}
		ops = append(ops, o)
	}
	Explain(t, model, ops)
}

// Explain logs whether model accepts ops, and each single operation
// whose removal makes them acceptable: where to look first in a history
// a soak kept, replayed against the model as it is now.
func Explain(t testing.TB, model porcupine.Model, ops []porcupine.Operation) {
	t.Helper()
	t.Logf("%d ops: linearizable %v", len(ops), porcupine.CheckOperations(model, ops))
	for i := range ops {
		rest := append(append([]porcupine.Operation{}, ops[:i]...), ops[i+1:]...)
		if porcupine.CheckOperations(model, rest) {
			t.Logf("without op %d (%v -> %v): linearizable", i, ops[i].Input, ops[i].Output)
		}
	}
}
