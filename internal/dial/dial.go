// Package dial connects a client the way the tests and examples of
// mongopatterns need it: detect the server, and where concurrent updates
// to one document are not atomic (FerretDB 1.x) use a single connection.
package dial

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Connect connects to uri with the options opts returns (called once, or
// twice; it must return new options each time) and detects the server
// with [patterns.Capabilities]: two commands.
//
// On a server without [patterns.FeatureConcurrentUpdates] (FerretDB 1.x,
// and servers Capabilities does not recognise) it reconnects with a pool of
// one connection, which serialises the updates so that the counts are
// exact. That models MongoDB's single-document atomicity faithfully, but
// cannot show interleavings inside one multi-document command. MongoDB and
// FerretDB 2.x keep the driver's default pool.
func Connect(ctx context.Context, uri string, opts func() *options.ClientOptions) (*mongo.Client, *patterns.Server, error) {
	c, srv, err := connect(ctx, opts().ApplyURI(uri))
	if err != nil || srv.Has(patterns.FeatureConcurrentUpdates) {
		return c, srv, err
	}
	_ = c.Disconnect(ctx)
	return connect(ctx, opts().ApplyURI(uri).SetMaxPoolSize(1))
}

func connect(ctx context.Context, o *options.ClientOptions) (*mongo.Client, *patterns.Server, error) {
	c, err := mongo.Connect(o)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	srv, err := patterns.Capabilities(ctx, c)
	if err != nil {
		_ = c.Disconnect(ctx)
		return nil, nil, err
	}
	return c, srv, nil
}
