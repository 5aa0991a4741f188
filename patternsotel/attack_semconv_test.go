package patternsotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestAttackSemconvMongoDBAttributes: patternsotel/doc.go:20 "Its
// attributes, by OpenTelemetry's database semantic conventions (version
// 1.43.0 ...)"; issue 37: "OpenTelemetry's database semantic-convention
// attributes (system mongodb, collection, operation)". The conventions for
// MongoDB (https://opentelemetry.io/docs/specs/semconv/database/mongodb/):
// "db.namespace | Conditionally Required If available. | The MongoDB
// database name"; "db.collection.name | Required"; "db.operation.name |
// Required | The name of the MongoDB command being executed
// (findAndModify; getMore; insertMany; bulkWrite)". The repository knows
// its database, yet no span nor measurement carries db.namespace, and a
// repository over two collections (subset: products, reviews) has no
// db.collection.name at all.
func TestAttackSemconvMongoDBAttributes(t *testing.T) {
	tm := newTelemetry(t)
	cmds := newCommandSpans(t)
	r := reviews(t, cmds.db, tm.hook)
	require.NoError(t, r.Add(context.Background(), "p1", Review{ID: "r1", Stars: 5, At: time.Unix(1, 0)}))
	a := attrs(tm.span(t, "subset.Add").Attributes())
	t.Run("span db.namespace", func(t *testing.T) {
		require.Equal(t, cmds.db.Name(), a["db.namespace"].AsString(), "span attributes: %v", a)
	})
	t.Run("metric db.namespace", func(t *testing.T) {
		h := tm.metrics(t)["db.client.operation.duration"].(metricdata.Histogram[float64])
		require.Len(t, h.DataPoints, 1)
		v, ok := h.DataPoints[0].Attributes.Value(attribute.Key("db.namespace"))
		require.True(t, ok, "duration attributes: %v", h.DataPoints[0].Attributes.ToSlice())
		require.Equal(t, cmds.db.Name(), v.AsString())
	})
	t.Run("span db.collection.name", func(t *testing.T) {
		require.Contains(t, a, attribute.Key("db.collection.name"), "required for MongoDB spans")
	})
}
