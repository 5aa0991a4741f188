package patternsotel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// ScopeName is the instrumentation scope of the tracer and the meter the
// hook takes from its providers.
const ScopeName = "github.com/mongopatterns/mongopatterns/patternsotel"

// The library's attributes (see the package documentation).
const (
	PackageKey     = attribute.Key("mongopatterns.package")
	CollectionsKey = attribute.Key("mongopatterns.collections")
	PlanKey        = attribute.Key("mongopatterns.plan")
	FeaturesKey    = attribute.Key("mongopatterns.features")
	CommandsKey    = attribute.Key("mongopatterns.commands")
	RetriesKey     = attribute.Key("mongopatterns.retries")
	ConflictsKey   = attribute.Key("mongopatterns.conflicts")
	DocumentsKey   = attribute.Key("mongopatterns.documents")
	PartialKey     = attribute.Key("mongopatterns.partial")
	OutcomeKey     = attribute.Key("mongopatterns.outcome")
)

// The names of the instruments besides db.client.operation.duration.
const (
	RetriesMetric   = "mongopatterns.operation.retries"
	ConflictsMetric = "mongopatterns.operation.conflicts"
)

// durationBuckets are the bucket boundaries, in seconds, that the
// semantic conventions give db.client.operation.duration.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// Option configures [New].
type Option func(*config)

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider makes the spans with tp instead of the global
// provider ([otel.GetTracerProvider]). A nil tp means the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider makes the metrics with mp instead of the global
// provider ([otel.GetMeterProvider]). A nil mp means the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// New returns a [patterns.Hook] that makes a span of each operation of
// the repositories it is set on, and records their duration, retries and
// conflicts (see the package documentation). Without options it uses the
// global providers as they are when an operation runs: one set later
// with [otel.SetTracerProvider] takes effect. The hook is safe for
// concurrent use; set the same one on every repository. New fails only
// when the meter provider refuses an instrument.
func New(opts ...Option) (patterns.Hook, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	meter := c.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	duration, err := dbconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("patternsotel: New: %w", err)
	}
	retries, err := meter.Int64Counter(RetriesMetric, metric.WithUnit("{retry}"),
		metric.WithDescription("Commands a mongopatterns operation sent again after a transient failure."))
	if err != nil {
		return nil, fmt.Errorf("patternsotel: New: %w", err)
	}
	conflicts, err := meter.Int64Counter(ConflictsMetric, metric.WithUnit("{conflict}"),
		metric.WithDescription("Compare-and-sets of a mongopatterns operation lost to concurrent writers."))
	if err != nil {
		return nil, fmt.Errorf("patternsotel: New: %w", err)
	}
	return &hook{
		tracer:    c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		startOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
		duration:  duration.Inst(),
		retries:   retries,
		conflicts: conflicts,
		names:     map[[2]string]string{},
	}, nil
}

type hook struct {
	tracer    trace.Tracer
	startOpts []trace.SpanStartOption
	duration  metric.Float64Histogram
	retries   metric.Int64Counter
	conflicts metric.Int64Counter

	mu    sync.RWMutex
	names map[[2]string]string // span names by package and operation
}

// spanKey is the context key of the span the hook started for an
// operation: OperationEnd must end its own span, not one that another hook
// (of [patterns.Hooks]) started after it.
type spanKey struct{ h *hook }

func (h *hook) OperationStart(ctx context.Context, op *patterns.Operation) context.Context {
	ctx, span := h.tracer.Start(ctx, h.spanName(op), h.startOpts...)
	if !span.IsRecording() {
		return ctx
	}
	span.SetAttributes(startAttrs(op)...)
	return context.WithValue(ctx, spanKey{h}, span)
}

func (h *hook) OperationEvent(ctx context.Context, op *patterns.Operation, e patterns.Event) {
	span, _ := ctx.Value(spanKey{h}).(trace.Span)
	switch e.Kind {
	case patterns.EventRetry:
		if span != nil {
			span.AddEvent("retry", trace.WithAttributes(
				semconv.ErrorType(e.Err), semconv.ExceptionMessageKey.String(errText(e.Err))))
		}
		if h.retries.Enabled(ctx) {
			h.retries.Add(ctx, 1, metric.WithAttributes(append(metricAttrs(op), semconv.ErrorType(e.Err))...))
		}
	case patterns.EventConflict:
		if span != nil {
			span.AddEvent("conflict", trace.WithAttributes(ConflictsKey.Int(op.Conflicts())))
		}
		if h.conflicts.Enabled(ctx) {
			h.conflicts.Add(ctx, 1, metric.WithAttributes(metricAttrs(op)...))
		}
	}
}

func (h *hook) OperationEnd(ctx context.Context, op *patterns.Operation) {
	if h.duration.Enabled(ctx) {
		attrs := append(metricAttrs(op), OutcomeKey.String(outcome(op)))
		if op.Err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(outcome(op)))
		}
		h.duration.Record(ctx, time.Since(op.Start).Seconds(), metric.WithAttributes(attrs...))
	}
	span, _ := ctx.Value(spanKey{h}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(endAttrs(op)...)
	if op.Err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(outcome(op)))
		span.SetStatus(codes.Error, op.Err.Error())
	}
	span.End()
}

// spanName is "<package>.<Operation>", built once per operation name.
func (h *hook) spanName(op *patterns.Operation) string {
	k := [2]string{op.Package, op.Name}
	h.mu.RLock()
	name, ok := h.names[k]
	h.mu.RUnlock()
	if ok {
		return name
	}
	name = op.Package + "." + op.Name
	h.mu.Lock()
	h.names[k] = name
	h.mu.Unlock()
	return name
}

// startAttrs are the attributes of op known when it starts.
func startAttrs(op *patterns.Operation) []attribute.KeyValue {
	return append(metricAttrs(op), CollectionsKey.StringSlice(op.Collections))
}

// endAttrs are the attributes of op set when it ends.
func endAttrs(op *patterns.Operation) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 8)
	if op.Plan != "" {
		features := make([]string, len(op.Features))
		for i, f := range op.Features {
			features[i] = string(f)
		}
		attrs = append(attrs, PlanKey.String(op.Plan), FeaturesKey.StringSlice(features))
	}
	attrs = append(attrs,
		CommandsKey.Int(op.Commands()),
		RetriesKey.Int(op.Retries()),
		ConflictsKey.Int(op.Conflicts()),
		OutcomeKey.String(outcome(op)),
	)
	if n, ok := op.Documents(); ok {
		attrs = append(attrs, DocumentsKey.Int64(n))
	}
	if op.Partial {
		attrs = append(attrs, PartialKey.Bool(true))
	}
	return attrs
}

// metricAttrs are the attributes of every measurement of op, and of its
// span.
func metricAttrs(op *patterns.Operation) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		semconv.DBSystemNameMongoDB,
		semconv.DBOperationName(op.Name),
		PackageKey.String(op.Package),
	)
	if op.Database != "" {
		attrs = append(attrs, semconv.DBNamespace(op.Database))
	}
	if len(op.Collections) > 0 {
		attrs = append(attrs, semconv.DBCollectionName(op.Collections[0]))
	}
	return attrs
}

// outcome is "ok", or what op's error means in few values: the text of
// the sentinel [patterns.Operation.Outcome] finds, else "partial" for an
// operation that gave up after writing part of its work, else the
// error's type.
func outcome(op *patterns.Operation) string {
	switch s := patterns.Sentinel(op.Err); {
	case op.Err == nil:
		return "ok"
	case s != nil:
		return s.Error()
	case op.Partial:
		return "partial"
	}
	return semconv.ErrorType(op.Err).Value.AsString()
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
