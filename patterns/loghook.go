package patterns

import (
	"context"
	"log/slog"
	"time"
)

// LogHook returns a [Hook] that writes the operations of a repository to
// logger: each retry and each lost compare-and-set at [slog.LevelDebug]
// ("mongopatterns: retry", "mongopatterns: conflict", with the error
// retried); the end of an operation that gave up at [slog.LevelWarn]
// ("mongopatterns: gave up": its error wraps [ErrConflict] after the
// bounded attempts, or it is [Operation.Partial]); the end of any other
// operation at [slog.LevelDebug] ("mongopatterns: operation"). Each record
// carries the operation's attributes: package, operation, collections,
// plan, features, commands, retries, conflicts, documents (when known),
// duration, outcome and error. A nil logger means [slog.Default]. Nothing
// is built for a level the logger does not enable.
func LogHook(logger *slog.Logger) Hook {
	if logger == nil {
		logger = slog.Default()
	}
	return logHook{logger}
}

type logHook struct{ l *slog.Logger }

func (h logHook) OperationStart(ctx context.Context, _ *Operation) context.Context { return ctx }

func (h logHook) OperationEvent(ctx context.Context, op *Operation, e Event) {
	if !h.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := append(logAttrs(op), slog.Any("error", e.Err))
	h.l.LogAttrs(ctx, slog.LevelDebug, "mongopatterns: "+e.Kind.String(), attrs...)
}

func (h logHook) OperationEnd(ctx context.Context, op *Operation) {
	level, msg := slog.LevelDebug, "mongopatterns: operation"
	if op.Partial || op.Outcome() == ErrConflict {
		level, msg = slog.LevelWarn, "mongopatterns: gave up"
	}
	if !h.l.Enabled(ctx, level) {
		return
	}
	attrs := append(logAttrs(op), slog.Duration("duration", time.Since(op.Start)))
	if op.Err != nil {
		attrs = append(attrs, slog.String("outcome", op.Outcome().Error()), slog.Any("error", op.Err))
	} else {
		attrs = append(attrs, slog.String("outcome", "ok"))
	}
	h.l.LogAttrs(ctx, level, msg, attrs...)
}

// logAttrs are the attributes of op that every record carries.
func logAttrs(op *Operation) []slog.Attr {
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs,
		slog.String("package", op.Package),
		slog.String("operation", op.Name),
		slog.Any("collections", op.Collections),
		slog.String("plan", op.Plan),
		slog.Any("features", op.Features),
		slog.Int("commands", op.Commands()),
		slog.Int("retries", op.Retries()),
		slog.Int("conflicts", op.Conflicts()),
	)
	if n, ok := op.Documents(); ok {
		attrs = append(attrs, slog.Int64("documents", n))
	}
	return attrs
}
