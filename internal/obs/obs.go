// Package obs counts what a repository's operation sends, for the
// [patterns.Hook] of its repository: the commands of its cursors (each
// getMore and killCursors), which the driver sends behind Next, All and
// Close. Every function takes the operation ([patterns.OperationFrom], or
// the one [patterns.StartOperation] returned), nil when the repository has
// no hook: then it only does what the driver's method does.
package obs

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Next is cur.Next, counting the getMore it sends when the batch in hand
// is used up and the server keeps the cursor open.
func Next(ctx context.Context, op *patterns.Operation, cur *mongo.Cursor) bool {
	if op != nil && cur.RemainingBatchLength() == 0 && cur.ID() != 0 {
		op.Sent(1)
	}
	return cur.Next(ctx)
}

// Close is cur.Close, counting the killCursors it sends when the server
// still keeps the cursor open.
func Close(ctx context.Context, op *patterns.Operation, cur *mongo.Cursor) error {
	if op != nil && cur.ID() != 0 {
		op.Sent(1)
	}
	return cur.Close(ctx)
}

// All is cur.All: it decodes every document of cur into *out, which it
// overwrites (a nil *out stays nil when cur is empty), and closes cur; it
// counts the getMores it sends.
func All[T any](ctx context.Context, op *patterns.Operation, cur *mongo.Cursor, out *[]T) error {
	if op == nil {
		return cur.All(ctx, out)
	}
	defer Close(context.WithoutCancel(ctx), op, cur)
	s := (*out)[:0]
	for Next(ctx, op, cur) {
		var v T
		if err := cur.Decode(&v); err != nil {
			return err
		}
		s = append(s, v)
	}
	if len(s) > 0 || *out != nil {
		*out = s
	}
	return cur.Err()
}

// Start starts an operation of a repository ([patterns.StartOperation])
// over collections of database, with hook, the Hook of its Config, and records the repository's plan if
// it has decided it (else the operation records it when it decides: see
// [lazy.Decide]). With a nil hook it returns ctx and a nil operation,
// allocating nothing.
func Start[P lazy.Plan](ctx context.Context, hook patterns.Hook, planned *lazy.Value[P], pkg, name, database string, collections []string) (context.Context, *patterns.Operation) {
	if hook == nil {
		return ctx, nil
	}
	info := patterns.OperationInfo{Package: pkg, Name: name, Database: database, Collections: collections}
	if p, ok := planned.Known(); ok {
		info.Plan, info.Features = p.Path()
	}
	return patterns.StartOperation(ctx, hook, info)
}
