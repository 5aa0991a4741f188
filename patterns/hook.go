package patterns

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Hook observes the operations of a repository: each exported operation
// that may send a command (Add, Get, Sync, MigrateAll, validation's Apply
// and Check...) reports its start, its retries and lost compare-and-sets,
// and its end, with what it did. Set one per repository, in the Hook field
// of its Config (package validation: its Hook option); a nil Hook
// costs nothing: no allocation, and one context lookup where a command is
// sent again.
//
// An adapter turns the reports into something else: [LogHook] writes them
// to a [log/slog.Logger]; the module
// github.com/mongopatterns/mongopatterns/patternsotel makes OpenTelemetry
// spans and metrics of them. [Hooks] sends them to several hooks.
//
// The methods are called from the goroutine of the operation, except
// OperationEvent, which an operation that works in several goroutines may
// call from any of them: a Hook used by several operations at once must
// be safe for concurrent use. They must not keep op after OperationEnd
// returns, nor change it.
type Hook interface {
	// OperationStart is called when an operation starts, before it sends
	// anything. The context it returns is the one the operation's
	// commands use, so that what the driver reports of them (a span of a
	// command monitor, say) can find the operation: return ctx itself, or
	// a context derived from it (never nil).
	OperationStart(ctx context.Context, op *Operation) context.Context
	// OperationEvent is called for each retry and each lost
	// compare-and-set, as it happens, with the context
	// OperationStart returned.
	OperationEvent(ctx context.Context, op *Operation, e Event)
	// OperationEnd is called once when the operation returns, with the
	// context OperationStart returned; op holds its counts and error.
	OperationEnd(ctx context.Context, op *Operation)
}

// Operation is one call of an exported operation of a repository, as a
// [Hook] sees it. The library fills it; a hook reads it.
//
// An operation that returns an iterator ([iter.Seq2]) runs while it is
// iterated: it starts when the iteration does and ends when the
// iteration ends (all was read, the loop broke, or an error was
// yielded), once per iteration.
type Operation struct {
	OperationInfo
	// Start is when the operation started.
	Start time.Time
	// Err is the error the operation returns, set before OperationEnd.
	Err error
	// Partial says that the operation gave up after writing part of
	// what it set out to, and that its documentation names the call that
	// completes it: extref's Update whose copies may be stale
	// (ErrNotSynced, completed by Sync). Set before OperationEnd.
	Partial bool

	hook     Hook
	ended    atomic.Bool
	ctx      context.Context
	parent   *Operation
	commands atomic.Int64
	retries  atomic.Int64
	lost     atomic.Int64
	docs     atomic.Int64 // documents affected, plus one; 0 while unknown
}

// OperationInfo is what a repository says of an operation when it starts
// it: see [StartOperation].
type OperationInfo struct {
	// Package is the package of the repository: "subset", "outlier",
	// "extref", "bucket", "versioning" or "validation".
	Package string
	// Name is the method's name, such as "Add" or "MigrateAll".
	Name string
	// Database is the name of the database of the repository's
	// collections.
	Database string
	// Collections are the collections the repository uses, in its
	// Config's order (an operation may use fewer of them). Do not
	// change the slice: it is the repository's.
	Collections []string
	// Plan is the path the repository takes on its server, "native" or
	// "portable", and Features the server features it relies on; both
	// are empty until the repository has decided its path (on its first
	// operation that needs it, which asks [Capabilities]), so a first
	// operation may show them only at OperationEnd.
	Plan     string
	Features []Feature
}

// Event is what an operation reports while it runs: see [EventKind].
type Event struct {
	Kind EventKind
	// Err is the failure that made the operation send a command again
	// (EventRetry); nil for EventConflict.
	Err error
}

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventRetry: the operation sends a command again (hands it to the
	// driver again, as it does, after its backoff) after a failure
	// that applied nothing and may pass at once (FerretDB 2.x's deadlock
	// detected; see each operation's documentation for which it
	// retries).
	EventRetry EventKind = iota + 1
	// EventConflict: a compare-and-set of the operation lost to a
	// concurrent writer (it matched nothing), so the operation reads
	// again and retries, up to the bound its documentation gives, after
	// which it returns [ErrConflict].
	EventConflict
)

// String names the kind: "retry" or "conflict".
func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventConflict:
		return "conflict"
	}
	return "unknown"
}

type operationKey struct{}

// StartOperation starts an operation of a repository whose Config holds
// hook, described by info, and returns the context its commands use and the operation to
// report to. With a nil hook it returns ctx and a nil *Operation, whose
// methods do nothing: nothing is allocated. The library's repositories
// call it; a repository of your own may too. An operation started inside
// another one (whose context carries it) is nested: its counts are added
// to the outer operation's when it ends.
func StartOperation(ctx context.Context, hook Hook, info OperationInfo) (context.Context, *Operation) {
	if hook == nil {
		return ctx, nil
	}
	op := &Operation{OperationInfo: info, Start: time.Now(), hook: hook}
	op.parent, _ = ctx.Value(operationKey{}).(*Operation)
	ctx = context.WithValue(ctx, operationKey{}, op)
	if c := hook.OperationStart(ctx, op); c != nil {
		ctx = c
	}
	op.ctx = ctx
	return ctx, op
}

// OperationFrom returns the operation ctx belongs to (the innermost one),
// or nil: a command monitor given the context of a command can name the
// operation that sent it.
func OperationFrom(ctx context.Context) *Operation {
	op, _ := ctx.Value(operationKey{}).(*Operation)
	return op
}

// Parent returns the operation op is nested in, or nil.
func (op *Operation) Parent() *Operation { return op.parent }

// End ends op with the error the operation returns, and reports it to
// the hook. It does nothing on a nil op, or on an op already ended.
func (op *Operation) End(err error) {
	if op == nil || op.ended.Swap(true) {
		return
	}
	op.Err = err
	op.hook.OperationEnd(op.ctx, op)
	if p := op.parent; p != nil {
		p.commands.Add(op.commands.Load())
		p.retries.Add(op.retries.Load())
		p.lost.Add(op.lost.Load())
		if n, ok := op.Documents(); ok {
			p.Affected(n)
		}
	}
}

// Finish is End for a deferred call, "defer op.Finish(&err)" with the
// operation's named error result: it ends op with *errp, or, when the
// operation panics (the loop body of an iteration, say), with an error
// saying so, and then panics again with the same value. It does nothing
// on a nil op.
func (op *Operation) Finish(errp *error) {
	if op == nil {
		return
	}
	if p := recover(); p != nil {
		op.End(fmt.Errorf("panic: %v", p))
		panic(p)
	}
	op.End(*errp)
}

// SetPlan records the path the repository takes ("native" or
// "portable") and the features it relies on. Nil-safe.
func (op *Operation) SetPlan(plan string, features []Feature) {
	if op != nil {
		op.Plan, op.Features = plan, features
	}
}

// SetPartial marks the operation [Operation.Partial]. Nil-safe.
func (op *Operation) SetPartial() {
	if op != nil {
		op.Partial = true
	}
}

// Sent counts n commands handed to the driver, as the operation hands
// them (a getMore and a killCursors each count; see
// [Operation.Commands]). Nil-safe; safe for concurrent use.
func (op *Operation) Sent(n int) {
	if op != nil {
		op.commands.Add(int64(n))
	}
}

// Retried reports that the operation sends a command again after err.
// Nil-safe; safe for concurrent use.
func (op *Operation) Retried(err error) {
	if op != nil {
		op.retries.Add(1)
		op.event(Event{Kind: EventRetry, Err: err})
	}
}

// Lost reports a compare-and-set that lost to a concurrent writer.
// Nil-safe; safe for concurrent use.
func (op *Operation) Lost() {
	if op != nil {
		op.lost.Add(1)
		op.event(Event{Kind: EventConflict})
	}
}

// Affected counts n documents written (inserted, updated, deleted or
// migrated) by the operation. Nil-safe; safe for concurrent use.
func (op *Operation) Affected(n int64) {
	if op != nil {
		if !op.docs.CompareAndSwap(0, n+1) {
			op.docs.Add(n)
		}
	}
}

func (op *Operation) event(e Event) {
	if !op.ended.Load() {
		op.hook.OperationEvent(op.ctx, op, e)
	}
}

// Commands is the number of commands the operation handed to the driver
// (each driver call that sends one, each getMore and killCursors of its
// cursors), those of the operations nested in it included. It is what the
// driver sends but for what the driver does on its own, which a command
// monitor given the operation's context sees: a command it sends again
// (a retryable read or write after a network error), a write it splits
// into several commands (past 48 MB or 100,000 statements), and one it
// never sends (the context had ended, or it refused the document).
func (op *Operation) Commands() int { return int(op.commands.Load()) }

// Retries is the number of commands the operation handed to the driver
// again after a transient failure (see [EventRetry]); the driver's own
// retries are not among them (see [Operation.Commands]).
func (op *Operation) Retries() int { return int(op.retries.Load()) }

// Conflicts is the number of compare-and-sets the operation lost to
// concurrent writers (see [EventConflict]).
func (op *Operation) Conflicts() int { return int(op.lost.Load()) }

// Documents is the number of documents the operation wrote (inserted,
// updated, deleted, migrated), and whether it is known: a read writes
// none and reports none.
func (op *Operation) Documents() (int64, bool) {
	n := op.docs.Load()
	if n == 0 {
		return 0, false
	}
	return n - 1, true
}

// sentinels are the errors [Operation.Outcome] reports, most specific
// first.
var sentinels = []error{ErrNotFound, ErrConflict, ErrInvalid, ErrUnsupported, ErrTooLarge,
	context.DeadlineExceeded, context.Canceled}

// Outcome is what the operation's error means: nil when it succeeded;
// else [Sentinel] of the error, when it wraps one; else the error itself
// (a network failure, say).
func (op *Operation) Outcome() error {
	if s := Sentinel(op.Err); s != nil {
		return s
	}
	return op.Err
}

// Sentinel returns the first of [ErrNotFound], [ErrConflict],
// [ErrInvalid], [ErrUnsupported], [ErrTooLarge],
// [context.DeadlineExceeded] and [context.Canceled] that err wraps, or
// nil: a value of few kinds, for a metric's attribute say.
func Sentinel(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// Hooks returns a hook that reports to each of hs in turn (nil ones are
// left out): OperationStart passes the context each returns to the next.
// It returns nil when no hook is left.
func Hooks(hs ...Hook) Hook {
	var m multiHook
	for _, h := range hs {
		if h != nil {
			m = append(m, h)
		}
	}
	switch len(m) {
	case 0:
		return nil
	case 1:
		return m[0]
	}
	return m
}

type multiHook []Hook

func (m multiHook) OperationStart(ctx context.Context, op *Operation) context.Context {
	for _, h := range m {
		if c := h.OperationStart(ctx, op); c != nil {
			ctx = c
		}
	}
	return ctx
}

func (m multiHook) OperationEvent(ctx context.Context, op *Operation, e Event) {
	for _, h := range m {
		h.OperationEvent(ctx, op, e)
	}
}

func (m multiHook) OperationEnd(ctx context.Context, op *Operation) {
	for i := len(m) - 1; i >= 0; i-- {
		m[i].OperationEnd(ctx, op)
	}
}
