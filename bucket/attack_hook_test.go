package bucket_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// countHook counts the operations that start and those that end.
type countHook struct {
	mu           sync.Mutex
	starts, ends int
	errs         []error
}

func (h *countHook) OperationStart(ctx context.Context, _ *patterns.Operation) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.starts++
	return ctx
}
func (h *countHook) OperationEvent(context.Context, *patterns.Operation, patterns.Event) {}
func (h *countHook) OperationEnd(_ context.Context, op *patterns.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends++
	h.errs = append(h.errs, op.Err)
}

// TestAttackPanicInLoopEndsOperation: patterns/hook.go:47 "An operation
// that returns an iterator ... ends when the iteration ends (all was
// read, the loop broke, or an error was yielded), once per iteration", and
// hook.go:39 "OperationEnd is called once when the operation returns";
// the brief of issue 37: no span leaked when an operation panics. A panic
// in the body of a range-over-func loop unwinds through the iterator
// (Go spec, "For statements with range clause": the iterator's deferred
// calls run): the iteration ended, so the operation must end. Range with
// an invalid interval (bucket/point.go validSeq) calls End after yield,
// not deferred, so a panicking loop body leaves the operation (the
// OpenTelemetry span) open for ever.
func TestAttackPanicInLoopEndsOperation(t *testing.T) {
	h := &countHook{}
	cfg := config(10)
	cfg.Hook = h
	s, _ := newBuckets(t, portable, cfg)
	ctx := context.Background()
	require.NoError(t, s.Add(ctx, "s1", readingAt(at(time.Minute), 1)))
	for name, from := range map[string]time.Time{"invalid interval": at(time.Hour), "valid interval": at(0)} {
		t.Run(name, func(t *testing.T) {
			h.starts, h.ends, h.errs = 0, 0, nil
			func() {
				defer func() { _ = recover() }()
				for range s.Range(ctx, "s1", from, at(30*time.Minute)) {
					panic("loop body")
				}
			}()
			require.Equal(t, h.starts, h.ends, "every operation that started ended (errors %v)", h.errs)
			require.Len(t, h.errs, 1)
			require.ErrorContains(t, h.errs[0], "panic: loop body", "a panicking iteration did not succeed")
		})
	}
}
