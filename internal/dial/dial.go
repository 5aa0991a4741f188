// Package dial connects a client the way the tests and examples of
// mongopatterns need it: detect the server, and on FerretDB use a single
// connection.
package dial

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Connect connects to uri with the options opts returns (called once, or
// twice on FerretDB; it must return new options each time) and detects the
// server with [patterns.Capabilities]: two commands.
//
// On FerretDB it reconnects with a pool of one connection. FerretDB 1.x,
// with either backend, loses concurrent updates to one document when they
// arrive on several connections (8 goroutines x 300 $inc applied 378 of
// 2400, with no error); one connection serialises them and the counts are
// exact. That models MongoDB's single-document atomicity faithfully, but
// cannot show interleavings inside one multi-document command.
func Connect(ctx context.Context, uri string, opts func() *options.ClientOptions) (*mongo.Client, *patterns.Server, error) {
	c, srv, err := connect(ctx, opts().ApplyURI(uri))
	if err != nil || srv.Kind != patterns.KindFerretDB {
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
