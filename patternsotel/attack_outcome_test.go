package patternsotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAttackBareDriverErrorOutcome: patternsotel/doc.go ("Outcomes"):
// "else the Go type of the error, after unwrapping fmt.Errorf's wrappers,
// as semconv.ErrorType names it ("go.mongodb.org/mongo-driver/v2/mongo.CommandError")".
// The driver returns mongo.CommandError and mongo.WriteException as values
// (driver v2.10.0 mongo/errors.go), and both hold slices (Labels, Raw,
// WriteErrors): an operation that returns one unwrapped (as any repository
// of the user's own, with patterns.StartOperation, may) must give the
// outcome "go.mongodb.org/mongo-driver/v2/mongo.CommandError", not make the
// hook panic with "comparing uncomparable type" in OperationEnd.
func TestAttackBareDriverErrorOutcome(t *testing.T) {
	for name, err := range map[string]error{
		"go.mongodb.org/mongo-driver/v2/mongo.CommandError":   mongo.CommandError{Code: 112, Name: "WriteConflict", Labels: []string{"TransientTransactionError"}},
		"go.mongodb.org/mongo-driver/v2/mongo.WriteException": mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 11000}}},
	} {
		t.Run(name, func(t *testing.T) {
			tm := newTelemetry(t)
			_, op := patterns.StartOperation(context.Background(), tm.hook,
				patterns.OperationInfo{Package: "bucket", Name: "Get", Collections: []string{"readings"}})
			require.NotPanics(t, func() { op.End(err) })
			s := tm.span(t, "bucket.Get")
			require.Equal(t, name, attrs(s.Attributes())["mongopatterns.outcome"].AsString())
		})
	}
}
