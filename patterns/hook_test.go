package patterns_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// recorder is a Hook that writes down what it sees.
type recorder struct {
	name string
	mu   sync.Mutex
	log  *[]string
}

type recKey struct{ name string }

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, r.name+" "+s)
}

func (r *recorder) OperationStart(ctx context.Context, op *patterns.Operation) context.Context {
	r.add("start " + op.Package + "." + op.Name)
	return context.WithValue(ctx, recKey{r.name}, true)
}

func (r *recorder) OperationEvent(ctx context.Context, op *patterns.Operation, e patterns.Event) {
	r.add(fmt.Sprintf("%s %v %v", e.Kind, e.Err, ctx.Value(recKey{r.name}) != nil))
}

func (r *recorder) OperationEnd(ctx context.Context, op *patterns.Operation) {
	n, known := op.Documents()
	r.add(fmt.Sprintf("end %s.%s commands=%d retries=%d conflicts=%d docs=%d/%v outcome=%v ctx=%v",
		op.Package, op.Name, op.Commands(), op.Retries(), op.Conflicts(), n, known, op.Outcome(), ctx.Value(recKey{r.name}) != nil))
}

func TestStartOperationWithoutHookCostsNothing(t *testing.T) {
	ctx := context.Background()
	failure := errors.New("deadlock detected")
	allocs := testing.AllocsPerRun(100, func() {
		c, op := patterns.StartOperation(ctx, nil, patterns.OperationInfo{Package: "subset", Name: "Add"})
		op.Sent(3)
		op.Retried(failure)
		op.Lost()
		op.Affected(2)
		op.SetPlan("native", nil)
		op.SetPartial()
		patterns.OperationFrom(c).Sent(1)
		op.End(nil)
		if c != ctx || op != nil {
			t.Fatal("a nil hook changed the context or made an operation")
		}
	})
	require.Zero(t, allocs)
}

func TestOperationCountsAndNesting(t *testing.T) {
	var log []string
	h := &recorder{name: "a", log: &log}
	ctx, outer := patterns.StartOperation(context.Background(), h, patterns.OperationInfo{Package: "extref", Name: "Repair", Collections: []string{"orders"}})
	require.Same(t, outer, patterns.OperationFrom(ctx))
	outer.Sent(2)
	outer.Affected(0)
	ictx, inner := patterns.StartOperation(ctx, h, patterns.OperationInfo{Package: "extref", Name: "Sync"})
	require.Same(t, inner, patterns.OperationFrom(ictx))
	patterns.OperationFrom(ictx).Sent(3)
	inner.Retried(errors.New("deadlock detected"))
	inner.Lost()
	inner.Affected(4)
	inner.End(nil)
	inner.End(errors.New("ended twice")) // ignored
	outer.Lost()
	outer.End(fmt.Errorf("extref: Repair: %w", patterns.ErrConflict))
	require.Equal(t, []string{
		"a start extref.Repair",
		"a start extref.Sync",
		"a retry deadlock detected true",
		"a conflict <nil> true",
		"a end extref.Sync commands=3 retries=1 conflicts=1 docs=4/true outcome=<nil> ctx=true",
		"a conflict <nil> true",
		"a end extref.Repair commands=5 retries=1 conflicts=2 docs=4/true outcome=conflict with a concurrent writer ctx=true",
	}, log)
	n, known := (&patterns.Operation{}).Documents()
	require.False(t, known, "a read reports no documents")
	require.Zero(t, n)
}

func TestOutcome(t *testing.T) {
	other := errors.New("connection reset")
	for _, c := range []struct {
		err, want error
	}{
		{nil, nil},
		{fmt.Errorf("subset: Add: %w", patterns.ErrNotFound), patterns.ErrNotFound},
		{fmt.Errorf("x: %w", &patterns.UnsupportedError{Feature: patterns.FeatureSortArray}), patterns.ErrUnsupported},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), context.DeadlineExceeded},
		{other, other},
	} {
		op := &patterns.Operation{Err: c.err}
		require.Equal(t, c.want, op.Outcome(), "%v", c.err)
	}
}

func TestHooksReportToEachInTurn(t *testing.T) {
	require.Nil(t, patterns.Hooks(nil, nil))
	var log []string
	a, b := &recorder{name: "a", log: &log}, &recorder{name: "b", log: &log}
	require.Same(t, a, patterns.Hooks(nil, a))
	ctx, op := patterns.StartOperation(context.Background(), patterns.Hooks(a, nil, b), patterns.OperationInfo{Package: "bucket", Name: "Add"})
	require.NotNil(t, ctx.Value(recKey{"a"}), "the context of each hook reaches the commands")
	require.NotNil(t, ctx.Value(recKey{"b"}))
	op.Lost()
	op.End(nil)
	require.Equal(t, []string{
		"a start bucket.Add", "b start bucket.Add",
		"a conflict <nil> true", "b conflict <nil> true",
		"b end bucket.Add commands=0 retries=0 conflicts=1 docs=0/false outcome=<nil> ctx=true",
		"a end bucket.Add commands=0 retries=0 conflicts=1 docs=0/false outcome=<nil> ctx=true",
	}, log, "ends in reverse order, as deferred calls")
}

func TestLogHookLevels(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := patterns.LogHook(logger)
	run := func(name string, f func(op *patterns.Operation) error) string {
		buf.Reset()
		_, op := patterns.StartOperation(context.Background(), h, patterns.OperationInfo{Package: "subset", Name: name, Collections: []string{"posts", "comments"}})
		op.SetPlan("native", []patterns.Feature{patterns.FeaturePushModifiers})
		op.End(f(op))
		return buf.String()
	}
	out := run("Add", func(op *patterns.Operation) error {
		op.Sent(3)
		op.Retried(errors.New("deadlock detected"))
		op.Affected(2)
		return nil
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Contains(t, lines[0], `level=DEBUG msg="mongopatterns: retry" package=subset operation=Add collections="[posts comments]" plan=native`)
	require.Contains(t, lines[0], `error="deadlock detected"`)
	require.Contains(t, lines[1], `level=DEBUG msg="mongopatterns: operation"`)
	require.Contains(t, lines[1], "commands=3 retries=1 conflicts=0 documents=2 duration=")
	require.Contains(t, lines[1], "outcome=ok")

	out = run("Remove", func(op *patterns.Operation) error {
		op.Lost()
		return fmt.Errorf("subset: Remove: %w", patterns.ErrConflict)
	})
	require.Contains(t, out, `level=DEBUG msg="mongopatterns: conflict"`)
	require.Contains(t, out, `level=WARN msg="mongopatterns: gave up" package=subset operation=Remove`)
	require.Contains(t, out, `outcome="conflict with a concurrent writer" error="subset: Remove: conflict with a concurrent writer"`)

	out = run("Update", func(op *patterns.Operation) error {
		op.SetPartial()
		return errors.New("updated, but its copies may be stale")
	})
	require.Contains(t, out, `level=WARN msg="mongopatterns: gave up"`, "a partial operation gave up")

	out = run("Get", func(*patterns.Operation) error { return fmt.Errorf("x: %w", patterns.ErrNotFound) })
	require.Contains(t, out, `level=DEBUG msg="mongopatterns: operation"`)
	require.NotContains(t, out, "documents=", "a read reports no documents")

	// A logger at Info writes only the give-ups.
	buf.Reset()
	quiet := patterns.LogHook(slog.New(slog.NewTextHandler(&buf, nil)))
	_, op := patterns.StartOperation(context.Background(), quiet, patterns.OperationInfo{Package: "subset", Name: "Add"})
	op.Retried(errors.New("deadlock detected"))
	op.End(nil)
	require.Empty(t, buf.String())
}
