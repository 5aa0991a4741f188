// Package seq turns driver cursors into iterators.
package seq

import (
	"context"
	"iter"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Cursor returns an iterator over the documents of the cursor that open
// returns (open sends one command, counted in the operation of ctx if
// any, as are the cursor's getMores and killCursors), each decoded into a new T. Building the iterator sends nothing:
// open runs when iteration starts, and every iteration runs it again. The
// cursor is closed when iteration ends, early or not. An error from open,
// from the cursor or from decoding is yielded once, with the zero T, and
// ends the iteration. Memory is bounded by the cursor's batch, not by the
// number of documents.
func Cursor[T any](ctx context.Context, open func(context.Context) (*mongo.Cursor, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		op := patterns.OperationFrom(ctx)
		op.Sent(1)
		cur, err := open(ctx)
		if err != nil {
			yield(zero, err)
			return
		}
		defer obs.Close(context.WithoutCancel(ctx), op, cur)
		for obs.Next(ctx, op, cur) {
			var v T
			if err := cur.Decode(&v); err != nil {
				yield(zero, err)
				return
			}
			if !yield(v, nil) {
				return
			}
		}
		if err := cur.Err(); err != nil {
			yield(zero, err)
		}
	}
}

// Batches returns an iterator over the documents of the cursor that open
// returns, as slices of at most n raw documents (n > 0). A slice also ends
// where the server's batch ends, so that a caller who writes something per
// slice (a bulk write) does it before the cursor's next getMore: memory is
// bounded by n. The documents are copies that stay valid after the
// iteration moves on. Building the iterator sends nothing; the cursor is
// closed when iteration ends; an error is yielded once, with a nil slice,
// and ends the iteration.
func Batches(ctx context.Context, n int, open func(context.Context) (*mongo.Cursor, error)) iter.Seq2[[]bson.Raw, error] {
	return func(yield func([]bson.Raw, error) bool) {
		op := patterns.OperationFrom(ctx)
		op.Sent(1)
		cur, err := open(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		defer obs.Close(context.WithoutCancel(ctx), op, cur)
		var batch []bson.Raw
		for obs.Next(ctx, op, cur) {
			batch = append(batch, slices.Clone(cur.Current))
			if cur.RemainingBatchLength() > 0 && len(batch) < n {
				continue
			}
			if !yield(batch, nil) {
				return
			}
			batch = nil
		}
		if err := cur.Err(); err != nil {
			yield(nil, err)
			return
		}
		if len(batch) > 0 {
			yield(batch, nil)
		}
	}
}

// Err returns an iterator that yields err once: for methods that return an
// iterator and find bad input before any query.
func Err[T any](err error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		yield(zero, err)
	}
}
