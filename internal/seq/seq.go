// Package seq turns driver cursors into iterators.
package seq

import (
	"context"
	"iter"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Cursor returns an iterator over the documents of the cursor that open
// returns, each decoded into a new T. Building the iterator sends nothing:
// open runs when iteration starts, and every iteration runs it again. The
// cursor is closed when iteration ends, early or not. An error from open,
// from the cursor or from decoding is yielded once, with the zero T, and
// ends the iteration. Memory is bounded by the cursor's batch, not by the
// number of documents.
func Cursor[T any](ctx context.Context, open func(context.Context) (*mongo.Cursor, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		cur, err := open(ctx)
		if err != nil {
			yield(zero, err)
			return
		}
		defer cur.Close(context.WithoutCancel(ctx))
		for cur.Next(ctx) {
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

// Err returns an iterator that yields err once: for methods that return an
// iterator and find bad input before any query.
func Err[T any](err error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		yield(zero, err)
	}
}
