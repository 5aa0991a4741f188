// Command observe shows what a repository reports of its operations:
// it sets the OpenTelemetry hook of package patternsotel on a subset
// repository (each product embeds its two newest reviews), runs a few
// operations inside the span of a request, and prints the spans with
// OpenTelemetry's stdout exporter, each as it ends: the operations'
// spans (subset.Add, subset.Get) are children of the request's, with the
// plan the repository took, the commands each sent and its outcome; the
// Get of a missing product has status Error.
//
//	go -C examples run ./observe
//
// It uses MONGODB_URI when set, and otherwise starts the embedded dev
// server (FerretDB), where the repository takes its portable path. A
// service sets the hook that patternsotel.New returns, with its own
// tracer and meter providers (or the global ones), on every repository.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/patternsotel"
	"github.com/mongopatterns/mongopatterns/subset"
)

// Review is one review, stored in the reviews collection; the newest two
// of a product are also embedded in it.
type Review struct {
	ID        string    `bson:"_id"`
	ProductID string    `bson:"productId,omitempty"`
	Stars     int       `bson:"stars"`
	At        time.Time `bson:"at"`
}

// Product is what a product page shows.
type Product struct {
	ID      string   `bson:"_id"`
	Name    string   `bson:"name"`
	Reviews []Review `bson:"reviews,omitempty"`
}

func main() { demo.Run("example_observe", run) }

func run(ctx context.Context, db *mongo.Database) error { return observe(ctx, db, os.Stdout) }

// observe runs the operations and writes their spans to w.
func observe(ctx context.Context, db *mongo.Database, w io.Writer) (err error) {
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(w), stdouttrace.WithPrettyPrint(), stdouttrace.WithoutTimestamps())
	if err != nil {
		return err
	}
	// WithSyncer exports each span as it ends; a service batches them
	// (sdktrace.WithBatcher) to its collector.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() { err = errors.Join(err, tp.Shutdown(context.WithoutCancel(ctx))) }()
	hook, err := patternsotel.New(patternsotel.WithTracerProvider(tp))
	if err != nil {
		return err
	}

	reviews, err := subset.New[Product, Review](db, subset.Config{
		Parents: "products", Field: "reviews",
		Items: "reviews", ParentField: "productId",
		SortField: "at", Descending: true, Cap: 2,
		Hook: hook,
	})
	if err != nil {
		return err
	}
	if err := patterns.EnsureIndexes(ctx, reviews.Indexes()...); err != nil {
		return err
	}
	if _, err := db.Collection("products").InsertOne(ctx, Product{ID: "lamp", Name: "Desk lamp"}); err != nil {
		return err
	}

	// The request a service handles: its span is the parent of the
	// operations' spans.
	ctx, request := tp.Tracer("example/observe").Start(ctx, "GET /products/lamp")
	defer request.End()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := reviews.Add(ctx, "lamp",
		Review{ID: "r1", Stars: 4, At: day},
		Review{ID: "r2", Stars: 5, At: day.Add(time.Hour)},
		Review{ID: "r3", Stars: 2, At: day.Add(2 * time.Hour)},
	); err != nil {
		return err
	}
	p, err := reviews.Get(ctx, "lamp")
	if err != nil {
		return err
	}
	if _, err := reviews.Get(ctx, "chair"); !errors.Is(err, patterns.ErrNotFound) {
		return fmt.Errorf("the Get of a missing product returned %v, not ErrNotFound", err)
	}
	request.End()
	fmt.Fprintf(w, "%s embeds %d of its reviews, the newest first: %s, %s\n", p.Name, len(p.Reviews), p.Reviews[0].ID, p.Reviews[1].ID)
	return nil
}
