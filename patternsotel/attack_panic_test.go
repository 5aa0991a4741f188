package patternsotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
)

// TestAttackPanickingOperationReportedOK: patternsotel/doc.go "A failed
// operation's span has status Error"; OpenTelemetry's "Recording errors"
// (https://opentelemetry.io/docs/specs/semconv/general/recording-errors/):
// "When the operation ends with an error, instrumentation: SHOULD set the
// span status code to Error"; the issue's brief: no span leaked or
// mis-reported when an operation panics. A panic in the loop body of
// subset's All unwinds through the iterator, whose deferred op.End(err)
// runs with err nil: the span ends with status Unset and
// mongopatterns.outcome "ok", as if All had succeeded.
func TestAttackPanickingOperationReportedOK(t *testing.T) {
	tm := newTelemetry(t)
	cmds := newCommandSpans(t)
	r := reviews(t, cmds.db, tm.hook)
	require.NoError(t, r.Add(context.Background(), "p1", Review{ID: "r1", Stars: 5, At: time.Unix(1, 0)}))
	require.Panics(t, func() {
		for range r.All(context.Background(), "p1") {
			panic("loop body")
		}
	})
	s := tm.span(t, "subset.All")
	a := attrs(s.Attributes())
	require.NotEqual(t, "ok", a["mongopatterns.outcome"].AsString(), "a panicking operation did not succeed")
	require.Equal(t, codes.Error, s.Status().Code)
}
