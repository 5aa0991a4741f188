package patternsotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/patternsotel"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// telemetry is an SDK that keeps what it records in memory, and the hook
// that reports to it.
type telemetry struct {
	tp     *sdktrace.TracerProvider
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	hook   patterns.Hook
}

func newTelemetry(t testing.TB) *telemetry {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	hook, err := patternsotel.New(patternsotel.WithTracerProvider(tp), patternsotel.WithMeterProvider(mp))
	require.NoError(t, err)
	return &telemetry{tp: tp, spans: spans, reader: reader, hook: hook}
}

// span returns the ended span of that name, which must be the only one.
func (tm *telemetry) span(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range tm.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "spans named %q", name)
	return found[0]
}

// metrics collects the metrics of the hook's scope, by name.
func (tm *telemetry) metrics(t testing.TB) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, patternsotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// attrs returns a span's attributes (or an event's) by key.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// commandSpans is a client whose command monitor records the span in the
// context of each command it starts, by command name.
type commandSpans struct {
	db   *mongo.Database
	mu   sync.Mutex
	seen map[string][]trace.SpanContext
}

func newCommandSpans(t *testing.T) *commandSpans {
	c := &commandSpans{seen: map[string][]trace.SpanContext{}}
	client := mongotest.Connect(t, mongotest.URI(), &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.seen[e.CommandName] = append(c.seen[e.CommandName], trace.SpanFromContext(ctx).SpanContext())
		},
	}, nil)
	c.db = client.Database(mongotest.DB(t).Name())
	return c
}

func (c *commandSpans) of(name string) []trace.SpanContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[name]
}

// TestSpanOfAnOperation runs an operation as a repository does
// (patterns.StartOperation, a command with the context it returns, its
// counts and events, End) inside a request's span: the operation's span
// is a child of the request's, the command's context carries the
// operation's span (so a driver-level span nests below it), and the span,
// its events and the metrics carry what the package documentation lists.
func TestSpanOfAnOperation(t *testing.T) {
	tm := newTelemetry(t)
	cmds := newCommandSpans(t)
	ctx, request := tm.tp.Tracer("test").Start(context.Background(), "request")

	info := patterns.OperationInfo{Package: "subset", Name: "Add", Collections: []string{"products", "reviews"}}
	opCtx, op := patterns.StartOperation(ctx, tm.hook, info)
	require.NotNil(t, op)
	require.True(t, trace.SpanFromContext(opCtx).IsRecording(), "the context the operation's commands use carries its span")
	_, err := cmds.db.Collection("reviews").InsertOne(opCtx, bson.D{{Key: "_id", Value: 1}})
	require.NoError(t, err)
	op.Sent(1)
	op.Retried(errors.New("deadlock detected"))
	op.Lost()
	op.Lost()
	op.Affected(1)
	op.SetPlan("native", []patterns.Feature{"a", "b"})
	op.End(nil)
	request.End()

	s := tm.span(t, "subset.Add")
	require.Equal(t, trace.SpanKindClient, s.SpanKind())
	require.Equal(t, request.SpanContext().SpanID(), s.Parent().SpanID(), "a child of the request's span")
	require.Equal(t, []trace.SpanContext{s.SpanContext()}, cmds.of("insert"), "the command's context carries the operation's span")
	require.Equal(t, codes.Unset, s.Status().Code)
	require.Equal(t, map[attribute.Key]attribute.Value{
		"db.system.name":            attribute.StringValue("mongodb"),
		"db.operation.name":         attribute.StringValue("Add"),
		"db.collection.name":        attribute.StringValue("products"),
		"mongopatterns.package":     attribute.StringValue("subset"),
		"mongopatterns.collections": attribute.StringSliceValue([]string{"products", "reviews"}),
		"mongopatterns.plan":        attribute.StringValue("native"),
		"mongopatterns.features":    attribute.StringSliceValue([]string{"a", "b"}),
		"mongopatterns.commands":    attribute.IntValue(1),
		"mongopatterns.retries":     attribute.IntValue(1),
		"mongopatterns.conflicts":   attribute.IntValue(2),
		"mongopatterns.documents":   attribute.Int64Value(1),
		"mongopatterns.outcome":     attribute.StringValue("ok"),
	}, attrs(s.Attributes()), "db.collection.name: the first of the repository's two collections")

	events := s.Events()
	require.Len(t, events, 3)
	require.Equal(t, "retry", events[0].Name)
	require.Equal(t, map[attribute.Key]attribute.Value{
		"error.type":        attribute.StringValue("*errors.errorString"),
		"exception.message": attribute.StringValue("deadlock detected"),
	}, attrs(events[0].Attributes))
	for i, e := range events[1:] {
		require.Equal(t, "conflict", e.Name)
		require.Equal(t, map[attribute.Key]attribute.Value{"mongopatterns.conflicts": attribute.IntValue(i + 1)}, attrs(e.Attributes))
	}

	m := tm.metrics(t)
	common := []attribute.KeyValue{
		attribute.String("db.system.name", "mongodb"),
		attribute.String("db.operation.name", "Add"),
		attribute.String("db.collection.name", "products"),
		attribute.String("mongopatterns.package", "subset"),
	}
	duration := m["db.client.operation.duration"].(metricdata.Histogram[float64])
	require.Len(t, duration.DataPoints, 1)
	require.Equal(t, uint64(1), duration.DataPoints[0].Count)
	require.Equal(t, []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}, duration.DataPoints[0].Bounds)
	require.Equal(t, attribute.NewSet(append(common, attribute.String("mongopatterns.outcome", "ok"))...), duration.DataPoints[0].Attributes)
	require.Equal(t, []metricdata.DataPoint[int64]{{
		Attributes: attribute.NewSet(append(common, attribute.String("error.type", "*errors.errorString"))...), Value: 1,
	}}, withoutTimes(m["mongopatterns.operation.retries"]))
	require.Equal(t, []metricdata.DataPoint[int64]{{
		Attributes: attribute.NewSet(common...), Value: 2,
	}}, withoutTimes(m["mongopatterns.operation.conflicts"]))
}

// withoutTimes returns the data points of a counter without their times.
func withoutTimes(a metricdata.Aggregation) []metricdata.DataPoint[int64] {
	sum := a.(metricdata.Sum[int64])
	out := make([]metricdata.DataPoint[int64], len(sum.DataPoints))
	for i, p := range sum.DataPoints {
		out[i] = metricdata.DataPoint[int64]{Attributes: p.Attributes, Value: p.Value}
	}
	return out
}

// TestOutcomes ends an operation of a repository over one collection with
// each kind of error: the span's status, error.type and
// mongopatterns.outcome, and the duration's attributes, say what the
// error means in few values (package documentation, Outcomes).
func TestOutcomes(t *testing.T) {
	var cmdErr error = mongo.CommandError{Code: 112, Name: "WriteConflict"}
	for _, row := range []struct {
		name    string
		err     error
		partial bool
		outcome string
	}{
		{"success", nil, false, "ok"},
		{"wrapped sentinel", fmt.Errorf("bucket: Get: %w", patterns.ErrNotFound), false, "not found"},
		{"bare sentinel", patterns.ErrConflict, false, "conflict with a concurrent writer"},
		{"bare context error", context.Canceled, false, "context canceled"},
		{"wrapped deadline", fmt.Errorf("bucket: Get: %w", context.DeadlineExceeded), false, "context deadline exceeded"},
		{"sentinel before partial", fmt.Errorf("extref: Update: %w", patterns.ErrConflict), true, "conflict with a concurrent writer"},
		{"partial", fmt.Errorf("extref: Update: %w", errors.New("updated, but its copies may be stale")), true, "partial"},
		{"driver error", fmt.Errorf("bucket: Get: %w", cmdErr), false, "go.mongodb.org/mongo-driver/v2/mongo.CommandError"},
		{"other error", fmt.Errorf("bucket: Get: %w", errors.New("connection reset")), false, "*errors.errorString"},
	} {
		t.Run(row.name, func(t *testing.T) {
			tm := newTelemetry(t)
			_, op := patterns.StartOperation(context.Background(), tm.hook,
				patterns.OperationInfo{Package: "bucket", Name: "Get", Collections: []string{"readings"}})
			if row.partial {
				op.SetPartial()
			}
			op.End(row.err)

			s := tm.span(t, "bucket.Get")
			a := attrs(s.Attributes())
			require.Equal(t, "readings", a["db.collection.name"].AsString(), "the repository's only collection")
			require.Equal(t, row.outcome, a["mongopatterns.outcome"].AsString())
			require.Equal(t, row.partial, a["mongopatterns.partial"].AsBool())
			dims := []attribute.KeyValue{
				attribute.String("db.system.name", "mongodb"),
				attribute.String("db.operation.name", "Get"),
				attribute.String("db.collection.name", "readings"),
				attribute.String("mongopatterns.package", "bucket"),
				attribute.String("mongopatterns.outcome", row.outcome),
			}
			if row.err == nil {
				require.Equal(t, sdktrace.Status{Code: codes.Unset}, s.Status())
				require.NotContains(t, a, attribute.Key("error.type"))
			} else {
				require.Equal(t, sdktrace.Status{Code: codes.Error, Description: row.err.Error()}, s.Status())
				require.Equal(t, row.outcome, a["error.type"].AsString())
				dims = append(dims, attribute.String("error.type", row.outcome))
			}
			duration := tm.metrics(t)["db.client.operation.duration"].(metricdata.Histogram[float64])
			require.Len(t, duration.DataPoints, 1)
			require.Equal(t, attribute.NewSet(dims...), duration.DataPoints[0].Attributes)
		})
	}
}

// TestNestedOperations: an operation started inside another one (its
// context carries it) is a child of the outer one's span, and a command
// the inner one sends carries the inner span.
func TestNestedOperations(t *testing.T) {
	tm := newTelemetry(t)
	cmds := newCommandSpans(t)
	info := patterns.OperationInfo{Package: "versioning", Name: "MigrateAll", Collections: []string{"users"}}
	outerCtx, outer := patterns.StartOperation(context.Background(), tm.hook, info)
	info.Name = "Upgrade"
	innerCtx, inner := patterns.StartOperation(outerCtx, tm.hook, info)
	_, err := cmds.db.Collection("users").InsertOne(innerCtx, bson.D{})
	require.NoError(t, err)
	inner.Sent(1)
	inner.End(nil)
	outer.End(nil)

	o, i := tm.span(t, "versioning.MigrateAll"), tm.span(t, "versioning.Upgrade")
	require.False(t, o.Parent().IsValid(), "the outer operation is a root span")
	require.Equal(t, o.SpanContext().SpanID(), i.Parent().SpanID())
	require.Equal(t, o.SpanContext().TraceID(), i.SpanContext().TraceID())
	require.Equal(t, []trace.SpanContext{i.SpanContext()}, cmds.of("insert"))
	require.Equal(t, int64(1), attrs(o.Attributes())["mongopatterns.commands"].AsInt64(), "the inner operation's commands count in the outer one's")
}

// TestSeveralHooks: with patterns.Hooks of two OpenTelemetry hooks each
// ends its own span (the second one's is a child of the first one's), and
// one set with a log hook reports as alone.
func TestSeveralHooks(t *testing.T) {
	a, b := newTelemetry(t), newTelemetry(t)
	_, op := patterns.StartOperation(context.Background(), patterns.Hooks(a.hook, patterns.LogHook(nil), b.hook),
		patterns.OperationInfo{Package: "outlier", Name: "Append", Collections: []string{"posts", "overflow"}})
	op.Lost()
	op.End(nil)
	sa, sb := a.span(t, "outlier.Append"), b.span(t, "outlier.Append")
	require.Equal(t, sa.SpanContext().SpanID(), sb.Parent().SpanID())
	require.Len(t, sa.Events(), 1)
	require.Len(t, sb.Events(), 1)
}

// TestDisabledProviders: on the no-op providers the hook allocates
// nothing beyond what the tracer's Start does (the operation itself and
// its context allocate alike with a hook that only starts a span), and the
// operation's context carries a span that does not record.
func TestDisabledProviders(t *testing.T) {
	hook, err := patternsotel.New(patternsotel.WithTracerProvider(tracenoop.NewTracerProvider()),
		patternsotel.WithMeterProvider(metricnoop.NewMeterProvider()))
	require.NoError(t, err)
	info := patterns.OperationInfo{Package: "subset", Name: "Get", Collections: []string{"products", "reviews"}}
	ctx := context.Background()
	opCtx, op := patterns.StartOperation(ctx, hook, info)
	require.False(t, trace.SpanFromContext(opCtx).IsRecording())
	op.End(nil)

	cycle := func(h patterns.Hook) float64 {
		return testing.AllocsPerRun(100, func() {
			_, op := patterns.StartOperation(ctx, h, info)
			op.Retried(context.Canceled)
			op.Lost()
			op.End(errors.ErrUnsupported)
		})
	}
	startOnly := spanOnly{tracenoop.NewTracerProvider().Tracer("")}
	require.Equal(t, cycle(startOnly), cycle(hook))
}

// spanOnly is a hook that only starts a span, for TestDisabledProviders.
type spanOnly struct{ tracer trace.Tracer }

func (h spanOnly) OperationStart(ctx context.Context, _ *patterns.Operation) context.Context {
	ctx, _ = h.tracer.Start(ctx, "")
	return ctx
}
func (spanOnly) OperationEvent(context.Context, *patterns.Operation, patterns.Event) {}
func (spanOnly) OperationEnd(context.Context, *patterns.Operation)                   {}
