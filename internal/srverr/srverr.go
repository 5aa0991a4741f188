// Package srverr reads the server errors that repositories react to, with
// the codes of every server the library knows: MongoDB's, and those of
// FerretDB 2.x, whose DocumentDB engine (PostgreSQL) answers some of the
// same conditions with codes of its own. It is the one place where error
// codes are matched.
package srverr

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Server error codes.
const (
	codeBadValue = 2
	// MongoDB 4.4+ answers BSONObjectTooLarge to an insert, an update or an
	// upsert whose document would pass 16 MiB.
	codeBSONObjectTooLarge = 10334
	// Older MongoDB: "Resulting document after update is larger than
	// 16777216" and "Document to upsert is larger than 16777216".
	codeUpdateTooLarge = 17419
	codeUpsertTooLarge = 17420
	// FerretDB 2.x (DocumentDB): "Size N is larger than MaxDocumentSize
	// 16777216".
	codeDocumentDBTooLarge = 285999133
	// FerretDB 2.x (DocumentDB): PostgreSQL's "deadlock detected" (40P01).
	// PostgreSQL aborted the statement, so nothing of it was applied; the
	// driver does not retry it.
	codeDocumentDBDeadlock = 16908292
	// An operation that ran past its maxTimeMS, which the driver derives
	// from the context's deadline: MongoDB's MaxTimeMSExpired, and FerretDB
	// 2.x's (DocumentDB's) PostgreSQL "canceling statement due to
	// statement timeout" (query_canceled, 57014).
	codeMaxTimeMSExpired           = 50
	codeDocumentDBStatementTimeout = 67371461
	// A server that lacks a command, an option, a pipeline stage or an
	// expression says so with one of these.
	codeCommandNotFound       = 59
	codeCommandNotSupported   = 115
	codeInvalidPipelineOption = 168
	codeNotImplemented        = 238
	codeUnrecognizedStage     = 40324
)

// TooLarge reports whether the server (or the driver, for a document past
// its message size) refused a write because a document would pass 16 MiB.
func TooLarge(err error) bool {
	if errors.Is(err, driver.ErrDocumentTooLarge) {
		return true
	}
	se, ok := errors.AsType[mongo.ServerError](err)
	return ok && (se.HasErrorCode(codeBSONObjectTooLarge) || se.HasErrorCode(codeUpdateTooLarge) ||
		se.HasErrorCode(codeUpsertTooLarge) || se.HasErrorCode(codeDocumentDBTooLarge) ||
		se.HasErrorCodeWithMessage(codeBadValue, "too large"))
}

// Transient reports whether a write failed in a way that applied nothing
// and may succeed if sent again at once: today FerretDB 2.x's deadlock
// detected (MongoDB resolves its write conflicts inside the server).
// Whether to send it again is the caller's decision: only a write that is
// safe to repeat may be.
func Transient(err error) bool {
	se, ok := errors.AsType[mongo.ServerError](err)
	return ok && se.HasErrorCode(codeDocumentDBDeadlock)
}

// TimedOut reports whether the server stopped an operation because it ran
// past its maxTimeMS, which the driver sets from the context's deadline:
// the deadline's failure, not one of the request (FerretDB 2.x reports
// it as a write error of each statement it stopped, which
// mongo.IsTimeout does not recognise).
func TimedOut(err error) bool {
	se, ok := errors.AsType[mongo.ServerError](err)
	return ok && (se.HasErrorCode(codeMaxTimeMSExpired) || se.HasErrorCode(codeDocumentDBStatementTimeout))
}

// NotImplemented reports whether the server said it does not implement
// what was asked, rather than that this one request failed: a command
// (CommandNotFound), an option of one (NotImplemented,
// CommandNotSupported), an aggregation stage (unrecognized stage name) or
// an expression operator (InvalidPipelineOperator).
func NotImplemented(err error) bool {
	se, ok := errors.AsType[mongo.ServerError](err)
	return ok && (se.HasErrorCode(codeNotImplemented) || se.HasErrorCode(codeCommandNotSupported) ||
		se.HasErrorCode(codeCommandNotFound) || se.HasErrorCode(codeUnrecognizedStage) ||
		se.HasErrorCode(codeInvalidPipelineOption))
}

// Classify adds to err the sentinel of package patterns its kind matches,
// so that errors.Is finds it: [patterns.ErrTooLarge] for [TooLarge],
// [patterns.ErrUnsupported] for [NotImplemented], [context.DeadlineExceeded]
// for [TimedOut] (the deadline the driver gave the server as maxTimeMS
// passed there first, so the caller sees the deadline it set, as
// mongo.IsTimeout does for MongoDB's code). Other errors, and nil,
// are returned as they are. The message is err's, followed by the
// sentinel's.
func Classify(err error) error {
	switch {
	case err == nil:
		return nil
	case TooLarge(err) && !errors.Is(err, patterns.ErrTooLarge):
		return fmt.Errorf("%w: %w", err, patterns.ErrTooLarge)
	case NotImplemented(err) && !errors.Is(err, patterns.ErrUnsupported):
		return fmt.Errorf("%w: %w", err, patterns.ErrUnsupported)
	case TimedOut(err) && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
	}
	return err
}

// Attempts is how many times [Retry] runs a write that keeps failing with
// a transient error.
const Attempts = 5

// Retry runs write until it returns nil or an error that is not
// [Transient], at most [Attempts] times, sleeping between attempts for a
// short randomised backoff (about 5, 10, 20 and 40 ms). It returns the
// last error, or ctx's error when ctx ends during a backoff. Only a write
// that is safe to send again after a transient failure may be retried:
// each retry is reported to the operation of ctx, if any
// ([patterns.Operation.Retried]); write counts its own commands. The
// failure applied nothing, but a retry runs after whatever others wrote
// meanwhile. A write of several statements must send again only those
// that failed with a transient error, unless each is guarded so that,
// once applied, it matches nothing: one that applied, sent again, could
// undo what others wrote since.
func Retry(ctx context.Context, write func() error) error {
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || attempt == Attempts || !Transient(err) {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		patterns.OperationFrom(ctx).Retried(err) // only a write sent again is a retry
		backoff *= 2
	}
}

// RetryStatements runs a write of n statements as [Retry] does, sending
// again after a transient failure only the statements that failed with
// it, as Retry asks of a write of several statements. send sends, as one
// command, the statements whose indexes (ascending, within 0..n-1) it is
// given, counts what the reply says applied (beside a
// mongo.BulkWriteException the driver returns the partial
// *mongo.BulkWriteResult of the statements that did), and returns its
// error; an unordered write (options SetOrdered(false)): an ordered one
// stops at its first failed statement, and the reply does not name those
// that never ran. After each send whose reply says which statements
// applied, applied (when not nil) is called once with their indexes
// (within 0..n-1, ascending; none, possibly): every one sent, when it
// succeeded; those a mongo.BulkWriteException without a write concern
// error does not name, when it names only statements that were sent.
// After any other reply it is not called: a write concern error, a
// command error, or an exception naming a statement that was not sent
// leaves them unknown. A
// mongo.BulkWriteException without a write concern error names
// the statements that failed, none of which applied: those that failed
// with a [Transient] error are sent again, alone; each other one is
// passed to failed with its index (within 0..n-1), and if failed is nil
// or returns true for one, RetryStatements returns the exception at once,
// sending nothing again. Any other Transient error failed the command
// whole, which applied nothing, and its statements are sent again, all of
// them; any other error is returned. After [Attempts] sends it returns
// the last error, with the statements that failed with it unsent.
//
// The driver splits a bulk write past the server's maxWriteBatchSize or
// message size into several commands, and returns a command error of one
// of them alone: sent again, all the statements of the others go again
// too; and of the write concern errors of its parts it keeps the last
// command's (a part whose reply has none erases an earlier part's), so
// that applied may name statements of unknown outcome. Only a write whose
// statements are guarded (each matches nothing once applied) may be that
// large.
func RetryStatements(ctx context.Context, n int, send func(todo []int) error, applied func(indexes []int), failed func(i int, err mongo.WriteError) (stop bool)) error {
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	if applied == nil {
		applied = func([]int) {}
	}
	err := Retry(ctx, func() error {
		err := send(todo)
		if err == nil {
			applied(todo)
			return nil
		}
		bwe, ok := errors.AsType[mongo.BulkWriteException](err)
		if !ok || bwe.WriteConcernError != nil {
			return err // a transient one is sent again whole
		}
		failedAt := make([]bool, len(todo))
		for _, we := range bwe.WriteErrors {
			if we.Index < 0 || we.Index >= len(todo) {
				return final{err} // the reply does not say which failed
			}
			failedAt[we.Index] = true
		}
		done := make([]int, 0, max(0, len(todo)-len(bwe.WriteErrors)))
		for k, i := range todo {
			if !failedAt[k] {
				done = append(done, i)
			}
		}
		applied(done)
		if len(bwe.WriteErrors) == 0 {
			return err
		}
		var again []int
		var transient error
		stop := false
		for _, we := range bwe.WriteErrors {
			i := todo[we.Index]
			switch {
			case Transient(we.WriteError):
				again, transient = append(again, i), err
			case failed == nil || failed(i, we.WriteError):
				stop = true
			}
		}
		if stop {
			return final{err}
		}
		todo = again
		return transient
	})
	if f, ok := errors.AsType[final](err); ok {
		return f.error
	}
	return err
}

// final is an error that [Retry] must not send again, whatever it wraps
// (it hides the transient write errors of the statements it leaves).
type final struct{ error }

// Refused reports whether the server answered a write with an error, so
// that the write applied nothing: a write error, or a command error
// carrying the server's code. A network error, a timeout on the client's
// side, an ended context or a write concern error (reported after the
// write applied) leave the outcome unknown: Refused is false for them.
func Refused(err error) bool {
	if we, ok := errors.AsType[mongo.WriteException](err); ok {
		return we.WriteConcernError == nil && len(we.WriteErrors) > 0
	}
	ce, ok := errors.AsType[mongo.CommandError](err)
	return ok && ce.Code != 0 && !ce.HasErrorLabel("NetworkError")
}

// DeleteOne deletes the document of coll that filter names (equalities on
// its _id, or on the fields of a unique index, so that it matches one
// document at most), retrying transient failures as [Retry] does, and reports
// whether it did. It sends a deleteOne (a retryable write on MongoDB). A
// delete that matched nothing is checked with a find of filter on the
// primary, one more command: FerretDB 2.x answers a deleteOne of a
// document that a concurrent update is rewriting with no match and leaves
// the document in place (17 to 20 times in 20 under 4 writers; MongoDB retries such a
// write conflict inside the server). While the document is there, the
// delete is sent again without a limit, which deletes the one document
// filter names there, up to [Attempts] times in all, after which
// DeleteOne returns an error wrapping [patterns.ErrConflict] with the
// document in place. Each delete that matched nothing while the document
// was there is reported as a lost compare-and-set to the operation of ctx
// ([patterns.Operation.Lost]), and its commands are counted. A delete without a limit is routed on a sharded
// collection as the deleteOne is: to the shard the filter's shard key
// names, else to every shard.
func DeleteOne(ctx context.Context, coll *mongo.Collection, filter any) (bool, error) {
	op := patterns.OperationFrom(ctx)
	for attempt := range Attempts {
		var res *mongo.DeleteResult
		err := Retry(ctx, func() (err error) {
			op.Sent(1)
			if attempt == 0 {
				res, err = coll.DeleteOne(ctx, filter)
			} else {
				res, err = coll.DeleteMany(ctx, filter)
			}
			return err
		})
		if err != nil || res.DeletedCount > 0 {
			return err == nil, err
		}
		if attempt == 0 {
			// The check reads the primary, where the delete ran: a
			// lagging secondary (a client's secondaryPreferred) could
			// still show a document deleted before, and turn a retried
			// Delete's ErrNotFound into ErrConflict.
			coll = coll.Clone(options.Collection().SetReadPreference(readpref.Primary()))
		}
		op.Sent(1)
		err = coll.FindOne(ctx, filter, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		op.Lost() // a concurrent update hid the document from the delete
	}
	return false, fmt.Errorf("the delete matched nothing %d times while the document was there: %w", Attempts, patterns.ErrConflict)
}
