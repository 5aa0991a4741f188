package patternsotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/patternsotel"
	"github.com/mongopatterns/mongopatterns/subset"
)

type Review struct {
	ID        string    `bson:"_id"`
	ProductID string    `bson:"productId,omitempty"`
	Stars     int       `bson:"stars"`
	At        time.Time `bson:"at"`
}

type Product struct {
	ID      string   `bson:"_id"`
	Name    string   `bson:"name"`
	Reviews []Review `bson:"reviews,omitempty"`
}

// withHook returns reviewsConfig with hook.
func withHook(hook patterns.Hook) subset.Config {
	cfg := reviewsConfig
	cfg.Hook = hook
	return cfg
}

var reviewsConfig = subset.Config{
	Parents: "products", Field: "reviews",
	Items: "reviews", ParentField: "productId",
	SortField: "at", Descending: true, Cap: 10,
}

// reviews builds the repository over db with hook, with its indexes and a
// product p1.
func reviews(t testing.TB, db *mongo.Database, hook patterns.Hook) *subset.Repo[Product, Review] {
	t.Helper()
	r, err := subset.New[Product, Review](db, withHook(hook))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	_, err = db.Collection("products").InsertOne(ctx, Product{ID: "p1", Name: "lamp"})
	require.NoError(t, err)
	return r
}

// TestRepositoryOperations sets the hook on a real subset repository: an
// Add and a Get inside a request's span are its children, named after the
// operations, with the plan the repository took and the commands it sent;
// the commands' contexts carry the operation's span; a Get of a missing
// product has status Error and error.type "not found".
func TestRepositoryOperations(t *testing.T) {
	tm := newTelemetry(t)
	cmds := newCommandSpans(t)
	r := reviews(t, cmds.db, tm.hook)
	ctx, request := tm.tp.Tracer("test").Start(context.Background(), "request")

	require.NoError(t, r.Add(ctx, "p1", Review{ID: "r1", Stars: 5, At: time.Unix(1, 0)}))
	p, err := r.Get(ctx, "p1")
	require.NoError(t, err)
	require.Len(t, p.Reviews, 1)
	_, err = r.Get(ctx, "p2")
	require.ErrorIs(t, err, patterns.ErrNotFound)
	request.End()

	add := tm.span(t, "subset.Add")
	require.Equal(t, request.SpanContext().SpanID(), add.Parent().SpanID())
	a := attrs(add.Attributes())
	require.Equal(t, "subset", a["mongopatterns.package"].AsString())
	require.Equal(t, []string{"products", "reviews"}, a["mongopatterns.collections"].AsStringSlice())
	require.Contains(t, []string{"native", "portable"}, a["mongopatterns.plan"].AsString())
	require.Equal(t, "ok", a["mongopatterns.outcome"].AsString())
	// The review inserted and the product updated; the first Add to a
	// product also stamps its revision (subset's package documentation,
	// Recomputation): one write more, on every plan.
	require.Equal(t, int64(3), a["mongopatterns.documents"].AsInt64(), "the review inserted and the product updated (and stamped)")
	require.Contains(t, cmds.of("insert"), add.SpanContext(), "the insert of the review carries the Add's span")

	var gets []attribute.Value
	for _, s := range tm.spans.Ended() {
		if s.Name() == "subset.Get" {
			require.Equal(t, request.SpanContext().SpanID(), s.Parent().SpanID())
			require.Equal(t, int64(1), attrs(s.Attributes())["mongopatterns.commands"].AsInt64(), "one findOne")
			gets = append(gets, attrs(s.Attributes())["mongopatterns.outcome"])
			if s.Status().Code == codes.Error {
				require.Equal(t, "not found", attrs(s.Attributes())["error.type"].AsString())
			}
		}
	}
	require.Equal(t, []attribute.Value{attribute.StringValue("ok"), attribute.StringValue("not found")}, gets)
}

// BenchmarkOperationNoopProvider times an operation as a repository runs
// it (patterns.StartOperation, one findOne with the context it returns,
// End) with the hook on the no-op providers (library) against the same
// with no hook (baseline): the goal is 1.05x at most (speed 0.95x at
// least, issue 37): the adapter's cost alone, whatever a package does.
func BenchmarkOperationNoopProvider(b *testing.B) {
	hook := noopHook(b)
	info := patterns.OperationInfo{Package: "subset", Name: "Get", Collections: []string{"products", "reviews"}}
	side := func(h patterns.Hook) func(b *testing.B) func(int) {
		return func(b *testing.B) func(int) {
			products := productsDB(b).Collection("products")
			return func(i int) {
				ctx, op := patterns.StartOperation(context.Background(), h, info)
				var p Product
				err := products.FindOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("p%02d", i%benchProducts)}}).Decode(&p)
				op.Sent(1)
				op.End(err)
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	mongotest.Compare(b, mongotest.Comparison{Library: side(hook), Baseline: side(nil), Speed: 1 / 1.05})
}

// BenchmarkRepositoryNoopProvider times subset's Get with the hook on the
// no-op providers against Get with no hook: the goal is 1.05x at most.
func BenchmarkRepositoryNoopProvider(b *testing.B) {
	hook := noopHook(b)
	side := func(h patterns.Hook) func(b *testing.B) func(int) {
		return func(b *testing.B) func(int) {
			r, err := subset.New[Product, Review](productsDB(b), withHook(h))
			require.NoError(b, err)
			return func(i int) {
				if _, err := r.Get(context.Background(), fmt.Sprintf("p%02d", i%benchProducts)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	mongotest.Compare(b, mongotest.Comparison{Library: side(hook), Baseline: side(nil), Speed: 1 / 1.05})
}

const benchProducts = 64

// productsDB returns a fresh database holding benchProducts products.
func productsDB(b *testing.B) *mongo.Database {
	db := mongotest.DB(b)
	docs := make([]any, benchProducts)
	for i := range docs {
		docs[i] = Product{ID: fmt.Sprintf("p%02d", i), Name: "product"}
	}
	_, err := db.Collection("products").InsertMany(context.Background(), docs)
	require.NoError(b, err)
	return db
}

func noopHook(b *testing.B) patterns.Hook {
	hook, err := patternsotel.New(patternsotel.WithTracerProvider(tracenoop.NewTracerProvider()),
		patternsotel.WithMeterProvider(metricnoop.NewMeterProvider()))
	require.NoError(b, err)
	return hook
}
