package bucket

import (
	"context"
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// errUnsent is the result of a model that [settings.write] did not send,
// and errUnknown of one whose command failed in a way that leaves unknown
// whether it applied.
var (
	errUnsent  = errors.New("not sent")
	errUnknown = errors.New("outcome unknown")
)

// write sends models unordered, at most limit per command (0: as many as
// the driver puts in one), and sends again, as [srverr.Retry] allows,
// those that fail with a transient error (which applied nothing). It
// returns each model's result: nil where it applied, the server's error
// where the server refused it (it applied nothing). When a command fails
// in a way that leaves unknown which of its models applied (a network
// error, a timeout, a write concern error), write stops there: it returns
// that error too, [errUnknown] as the result of each model of that
// command, and [errUnsent] for those it had not sent yet. It counts its
// commands (one per BulkWrite) and the documents they wrote in the
// operation of ctx, if any.
func (s *settings) write(ctx context.Context, models []mongo.WriteModel, limit int) ([]error, error) {
	results := make([]error, len(models))
	todo := make([]int, len(models))
	for i := range todo {
		todo[i] = i
		results[i] = errUnsent
	}
	if limit <= 0 {
		limit = len(models)
	}
	var unknown error
	op := patterns.OperationFrom(ctx)
	// When Retry gives up, the transient errors left are in results.
	_ = srverr.Retry(ctx, func() error {
		var again []int
		var last error
		for chunk := range slices.Chunk(todo, limit) {
			batch := make([]mongo.WriteModel, len(chunk))
			for i, at := range chunk {
				batch[i] = models[at]
				results[at] = nil
			}
			op.Sent(1)
			res, err := s.coll.BulkWrite(ctx, batch, options.BulkWrite().SetOrdered(false))
			if res != nil {
				if n := res.InsertedCount + res.ModifiedCount + res.UpsertedCount; n > 0 || err == nil {
					op.Affected(n)
				}
			}
			if err == nil {
				continue
			}
			bwe, ok := errors.AsType[mongo.BulkWriteException](err)
			switch {
			case ok && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0:
				for _, we := range bwe.WriteErrors {
					at := chunk[we.Index]
					results[at] = we.WriteError
					if srverr.Transient(we.WriteError) {
						again = append(again, at)
						last = err
					}
				}
			case len(chunk) == 1 && srverr.Transient(err):
				// A single statement that the server aborted: it applied
				// nothing.
				results[chunk[0]] = err
				again = append(again, chunk[0])
				last = err
			default:
				// The server did not say which statements applied, if any.
				for _, at := range chunk {
					results[at] = errUnknown
				}
				unknown = err
				return nil
			}
		}
		todo = again
		return last
	})
	return results, srverr.Classify(unknown)
}
