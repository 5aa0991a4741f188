// Package patternsotel turns the operations of mongopatterns' repositories
// into OpenTelemetry spans and metrics: set the [patterns.Hook] that [New]
// returns in the Hook field of a repository's Config (package validation:
// its Hook option). It is a module of its own, so that only a program
// that imports it depends on OpenTelemetry.
//
// # Spans
//
// Each operation is a span of kind client named "<package>.<Operation>"
// ("subset.Add", "versioning.MigrateAll"), a child of the span in the
// context the operation is given. It starts when the operation starts and
// ends when it returns; the context of its commands carries it, so the
// spans a driver-level instrumentation makes of the commands (or what a
// command monitor sees with their context) are its children. An operation
// nested in another one (see [patterns.StartOperation]) is a child of the
// outer one's span. Its attributes, by OpenTelemetry's database semantic
// conventions (version 1.43.0 of package
// go.opentelemetry.io/otel/semconv, whose schema URL the tracer carries):
//
//	db.system.name      "mongodb"
//	db.namespace        the database of the repository's collections
//	db.collection.name  the repository's first collection, in its Config's
//	                    order (the parents, the source, the buckets...): the
//	                    conventions require one, and take the first of a
//	                    query that names several; mongopatterns.collections
//	                    has them all
//	db.operation.name   the operation: "Add", "MigrateAll". The conventions
//	                    name a MongoDB command there; the span of a library
//	                    operation covers several, whose own spans (a driver
//	                    instrumentation's, nested below) name them
//	error.type          when the operation failed: see Outcomes below
//
// and those of the library, as [patterns.LogHook] writes them:
//
//	mongopatterns.package      "subset", "outlier", "extref", "bucket",
//	                           "versioning" or "validation"
//	mongopatterns.collections  every collection of the repository, in its
//	                           Config's order
//	mongopatterns.plan         "native" or "portable" (absent until the
//	                           repository has decided it)
//	mongopatterns.features     the server features the plan relies on
//	mongopatterns.commands     the commands sent ([patterns.Operation.Commands])
//	mongopatterns.retries      the commands sent again after a transient failure
//	mongopatterns.conflicts    the compare-and-sets lost to concurrent writers
//	mongopatterns.documents    the documents written, when known
//	mongopatterns.partial      true when the operation gave up after writing
//	                           part of its work ([patterns.Operation.Partial])
//	mongopatterns.outcome      "ok", or the outcome of an error (see below)
//
// The counts, the plan and the outcome are set when the operation ends.
// A failed operation's span has status Error, with the error's text as
// its description. Each retry adds an event "retry" (with error.type and
// exception.message: the failure retried), each lost compare-and-set an
// event "conflict" (with mongopatterns.conflicts: the count so far).
//
// # Metrics
//
//	db.client.operation.duration       histogram, seconds (the conventions'
//	                                   buckets), of each operation
//	mongopatterns.operation.retries    counter {retry}
//	mongopatterns.operation.conflicts  counter {conflict}
//
// Each measurement carries db.system.name, db.operation.name,
// mongopatterns.package and db.collection.name (as the span); the
// duration also mongopatterns.outcome and, when the operation failed,
// error.type; a retry also the error.type of the failure retried.
//
// # Outcomes
//
// mongopatterns.outcome and error.type say what an error means in few
// values, so that they can label metrics: the text of the
// [patterns.Operation.Outcome] sentinel the error wraps ("not found",
// "conflict with a concurrent writer", "invalid", "unsupported by the
// server", "document too large", "context deadline exceeded", "context
// canceled"); else "partial" for an operation that gave up after writing
// part of its work ([patterns.Operation.Partial]: extref's Update that
// returns ErrNotSynced); else the Go type of the error, after unwrapping
// [fmt.Errorf]'s wrappers, as semconv.ErrorType names it
// ("go.mongodb.org/mongo-driver/v2/mongo.CommandError"). The error's text
// is the span status's description, not an attribute.
//
// # Cost
//
// The hook does what OpenTelemetry does for a span and three instruments,
// and nothing more: it builds no attribute for a span that is not
// recording nor for an instrument that is not enabled, so on the no-op
// providers an operation costs what the no-op tracer's Start costs (one
// context) and three calls that return at once.
package patternsotel
