package mongotest

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Recorder is a [patterns.Hook] for tests: it keeps every operation it
// sees end, its events, and, through the harness's command monitor, the
// commands the harness's clients sent with the context of each operation
// (to any database). Set it as a repository's Config.Hook.
type Recorder struct {
	mu      sync.Mutex
	started []*patterns.Operation
	ended   []*patterns.Operation
	events  map[*patterns.Operation][]patterns.Event
	sent    map[*patterns.Operation][]string // by the monitor, to the innermost operation
}

// recorders are the Recorders the monitor reports to; guarded by
// countersMu.
var recorders []*Recorder

// NewRecorder returns a Recorder that the monitor reports to until the
// test ends.
func NewRecorder(t testing.TB) *Recorder {
	r := &Recorder{}
	r.Reset()
	countersMu.Lock()
	recorders = append(recorders, r)
	countersMu.Unlock()
	t.Cleanup(func() {
		countersMu.Lock()
		defer countersMu.Unlock()
		recorders = slices.DeleteFunc(recorders, func(o *Recorder) bool { return o == r })
	})
	return r
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started, r.ended = nil, nil
	r.events = map[*patterns.Operation][]patterns.Event{}
	r.sent = map[*patterns.Operation][]string{}
}

// OperationStart records op.
func (r *Recorder) OperationStart(ctx context.Context, op *patterns.Operation) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, op)
	return ctx
}

// OperationEvent records e.
func (r *Recorder) OperationEvent(_ context.Context, op *patterns.Operation, e patterns.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[op] = append(r.events[op], e)
}

// OperationEnd records op's end.
func (r *Recorder) OperationEnd(_ context.Context, op *patterns.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, op)
}

// command is called by the monitor for a command sent with op's context.
func (r *Recorder) command(op *patterns.Operation, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.started, op) {
		r.sent[op] = append(r.sent[op], name)
	}
}

// Ended returns the operations that ended, in the order they did.
func (r *Recorder) Ended() []*patterns.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ended)
}

// Events returns the events op reported.
func (r *Recorder) Events(op *patterns.Operation) []patterns.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[op])
}

// Sent returns the commands the monitor saw sent with op's context or the
// context of an operation nested in it.
func (r *Recorder) Sent(op *patterns.Operation) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for o, names := range r.sent {
		for p := o; p != nil; p = p.Parent() {
			if p == op {
				out = append(out, names...)
				break
			}
		}
	}
	return out
}

// RequireReports runs call, which must call the operation name of a
// repository of package pkg whose Config.Hook is r (draining it, if it
// returns an iterator), and requires what every operation promises its
// hook: it started and ended once, outermost (operations nested in it
// may end too), with the error call returned; the commands it counted are
// the commands the monitor saw sent with its context (so each command
// used the context the hook returned; a call that makes the driver send
// a command again, split a write or send nothing is outside what this
// checks: see [patterns.Operation.Commands]) and there was at least one unless
// sendsNothing; its plan is named once the repository decided it. It
// returns the operation.
func (r *Recorder) RequireReports(t testing.TB, pkg, name string, sendsNothing bool, call func() error) *patterns.Operation {
	t.Helper()
	r.Reset()
	err := call()
	var top []*patterns.Operation
	for _, op := range r.Ended() {
		if op.Parent() == nil {
			top = append(top, op)
		}
	}
	require.Len(t, top, 1, "%s.%s: one operation reported", pkg, name)
	op := top[0]
	require.Equal(t, pkg, op.Package)
	require.Equal(t, name, op.Name)
	require.NotEmpty(t, op.Collections, "%s.%s names its collections", pkg, name)
	require.Equal(t, err, op.Err, "%s.%s: the error it returned", pkg, name)
	sent := r.Sent(op)
	require.Equal(t, len(sent), op.Commands(), "%s.%s: the commands it counted are those sent with its context: %v", pkg, name, sent)
	if !sendsNothing {
		require.NotZero(t, op.Commands(), "%s.%s sends a command", pkg, name)
	}
	return op
}

// RequireEveryOperation requires that the exported methods of the type
// of repo (a pointer) are exactly those named in reported and pure (the
// methods that send nothing and report nothing, such as Indexes): a
// method added without a row in a package's test of its hook fails it.
func RequireEveryOperation(t testing.TB, repo any, reported map[string]bool, pure ...string) {
	t.Helper()
	typ := reflect.TypeOf(repo)
	var missing []string
	for i := range typ.NumMethod() {
		m := typ.Method(i).Name
		if !reported[m] && !slices.Contains(pure, m) {
			missing = append(missing, m)
		}
	}
	require.Empty(t, missing, "%v: exported methods that no test shows reporting to the hook", typ)
	for m := range reported {
		_, ok := typ.MethodByName(m)
		require.True(t, ok, "%v has no method %s", typ, m)
	}
}

// Row is one call of an operation for [Recorder.RequireRows].
type Row struct {
	Name         string       // the method it calls
	SendsNothing bool         // see [Recorder.RequireReports]
	Call         func() error // calls it (draining an iterator)
	// Docs is the number of documents it writes, or NoDocs (a read, or
	// a call that fails before it writes), SomeDocs (at least one, the
	// number differs by plan) or AnyDocs (not checked: it differs by
	// plan).
	Docs    int64
	Outcome error // the sentinel its error wraps ([patterns.Operation.Outcome]); nil: it succeeds
}

// The values of Row.Docs that are not a number of documents.
const (
	NoDocs int64 = -1 - iota
	SomeDocs
	AnyDocs
)

// RequireRows runs each row, in order, through [Recorder.RequireReports]
// and requires of the operation it reports the row's outcome and
// documents, the Package, Collections, Plan and Features of want (the
// plan's path, as the repository's plan names it), and no retry and no
// conflict; then it requires ([RequireEveryOperation]) that the rows
// name every exported method of repo but pure.
func (r *Recorder) RequireRows(t testing.TB, repo any, want patterns.OperationInfo, rows []Row, pure ...string) {
	t.Helper()
	reported := map[string]bool{}
	for _, row := range rows {
		reported[row.Name] = true
		op := r.RequireReports(t, want.Package, row.Name, row.SendsNothing, row.Call)
		if row.Outcome == nil {
			require.NoError(t, op.Outcome(), "%s: outcome", row.Name)
		} else {
			require.ErrorIs(t, op.Outcome(), row.Outcome, "%s: outcome", row.Name)
		}
		require.Equal(t, want.Collections, op.Collections, row.Name)
		require.Equal(t, want.Plan, op.Plan, row.Name)
		require.Equal(t, want.Features, op.Features, row.Name)
		n, known := op.Documents()
		switch row.Docs {
		case AnyDocs:
		case NoDocs:
			require.False(t, known, "%s: a read or a failed check reports no documents (%d)", row.Name, n)
		case SomeDocs:
			require.True(t, known, "%s: documents written", row.Name)
			require.Positive(t, n, "%s: documents written", row.Name)
		default:
			require.True(t, known, "%s: documents written", row.Name)
			require.Equal(t, row.Docs, n, "%s: documents written", row.Name)
		}
		require.Zero(t, op.Retries(), row.Name)
		require.Zero(t, op.Conflicts(), row.Name)
	}
	RequireEveryOperation(t, repo, reported, pure...)
}

// RequireConflicts requires of op, an operation r recorded, that it
// succeeded after losing n compare-and-sets, each reported as an
// [patterns.EventConflict] and counted.
func (r *Recorder) RequireConflicts(t testing.TB, op *patterns.Operation, n int) {
	t.Helper()
	require.NoError(t, op.Err)
	require.Equal(t, n, op.Conflicts())
	require.Equal(t, slices.Repeat([]patterns.Event{{Kind: patterns.EventConflict}}, n), r.Events(op))
}
