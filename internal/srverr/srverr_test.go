package srverr_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The errors as the driver returns them from the replies of each server.
var (
	mongoTooLarge  = mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 10334, Message: "BSONObj size: 16777230 (0x100000E) is invalid. Size must be between 0 and 16793600(16MB)"}}}
	mongoUpdate44  = mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 17419, Message: "Resulting document after update is larger than 16777216"}}}
	legacyInsert   = mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 2, Message: "object to insert too large. size in bytes: 16777300, max size: 16777216"}}}
	documentDBSize = mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 285999133, Message: "Size 16777231 is larger than MaxDocumentSize 16777216"}}}
	deadlock       = mongo.CommandError{Code: 16908292, Message: "deadlock detected", Name: "InternalError"}
	deadlockInBulk = mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: 16908292, Message: "deadlock detected"}}}}
	notImplemented = mongo.CommandError{Code: 238, Message: "findAndModify: support for field \"hint\" is not implemented yet", Name: "NotImplemented"}
	notSupported   = mongo.CommandError{Code: 115, Message: "hint is not supported", Name: "CommandNotSupported"}
	noCommand      = mongo.CommandError{Code: 59, Message: "no such command: 'startTransaction'", Name: "CommandNotFound"}
	noStage        = mongo.CommandError{Code: 40324, Message: "Unrecognized pipeline stage name: '$sample'"}
	noExpression   = mongo.CommandError{Code: 168, Message: "Unrecognized expression '$sortArray'", Name: "InvalidPipelineOperator"}
	duplicate      = mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 11000, Message: "Duplicate key violation on the requested collection: Index 'k_1'"}}}
	otherBadValue  = mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 2, Message: "cannot $push to a non-array field"}}}
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name                       string
		err                        error
		tooLarge, transient, unimp bool
	}{
		{"MongoDB BSONObjectTooLarge", mongoTooLarge, true, false, false},
		{"MongoDB 4.4 update too large", mongoUpdate44, true, false, false},
		{"legacy insert too large", legacyInsert, true, false, false},
		{"DocumentDB size", documentDBSize, true, false, false},
		{"driver message too large", driver.ErrDocumentTooLarge, true, false, false},
		{"wrapped", errors.Join(errors.New("push"), documentDBSize), true, false, false},
		{"DocumentDB deadlock", deadlock, false, true, false},
		{"deadlock in a bulk write", deadlockInBulk, false, true, false},
		{"NotImplemented", notImplemented, false, false, true},
		{"CommandNotSupported", notSupported, false, false, true},
		{"CommandNotFound", noCommand, false, false, true},
		{"unrecognized stage", noStage, false, false, true},
		{"unrecognized expression", noExpression, false, false, true},
		{"duplicate key", duplicate, false, false, false},
		{"another BadValue", otherBadValue, false, false, false},
		{"not a server error", context.DeadlineExceeded, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.tooLarge, srverr.TooLarge(tc.err))
			require.Equal(t, tc.transient, srverr.Transient(tc.err))
			require.Equal(t, tc.unimp, srverr.NotImplemented(tc.err))
			got := srverr.Classify(tc.err)
			require.Equal(t, tc.tooLarge, srverr.TooLarge(got), "the cause stays in the chain")
			require.Equal(t, tc.tooLarge, errors.Is(got, patterns.ErrTooLarge))
			require.Equal(t, tc.unimp, errors.Is(got, patterns.ErrUnsupported))
		})
	}
	require.True(t, mongo.IsDuplicateKeyError(duplicate), "the driver reads DocumentDB's duplicate key")
	require.NoError(t, srverr.Classify(nil))
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := srverr.Retry(ctx, func() error {
		if n++; n < 3 {
			return deadlock
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, n, "retried until it succeeded")

	n = 0
	err = srverr.Retry(ctx, func() error { n++; return deadlock })
	require.True(t, srverr.Transient(err))
	require.Equal(t, srverr.Attempts, n, "bounded")

	n = 0
	err = srverr.Retry(ctx, func() error { n++; return duplicate })
	require.True(t, mongo.IsDuplicateKeyError(err))
	require.Equal(t, 1, n, "a permanent error is not retried")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	err = srverr.Retry(cancelled, func() error { return deadlock })
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, srverr.Transient(err), "the last server error is kept")
	require.Less(t, time.Since(start), time.Second)
}

func TestRefused(t *testing.T) {
	require.True(t, srverr.Refused(duplicate), "a write error applied nothing")
	require.True(t, srverr.Refused(deadlock), "a command error with a code")
	require.False(t, srverr.Refused(context.DeadlineExceeded), "a timeout leaves the outcome unknown")
	require.False(t, srverr.Refused(mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}), "a network error")
	require.False(t, srverr.Refused(mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}), "a write concern error comes after the write")
}

// TestTimedOut: the server's time-out of an operation past its maxTimeMS
// (MongoDB's MaxTimeMSExpired, FerretDB 2.x's statement timeout, which
// comes as a write error) is the deadline's: Classify adds
// context.DeadlineExceeded to it, and nothing else is TimedOut.
func TestTimedOut(t *testing.T) {
	mongoMaxTime := mongo.CommandError{Code: 50, Message: "operation exceeded time limit", Name: "MaxTimeMSExpired"}
	documentDBTimeout := mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 67371461, Message: "canceling statement due to statement timeout"}}}
	for _, err := range []error{mongoMaxTime, documentDBTimeout} {
		require.True(t, srverr.TimedOut(err), "%v", err)
		require.ErrorIs(t, srverr.Classify(err), context.DeadlineExceeded)
		require.ErrorContains(t, srverr.Classify(err), err.Error())
		require.True(t, srverr.TimedOut(srverr.Classify(err)), "the cause stays in the chain")
		require.True(t, srverr.Refused(srverr.Classify(err)), "the server stopped it: nothing applied")
	}
	for _, err := range []error{deadlock, duplicate, notImplemented, documentDBSize, context.Canceled} {
		require.False(t, srverr.TimedOut(err), "%v", err)
		require.NotErrorIs(t, srverr.Classify(err), context.DeadlineExceeded)
	}
	require.False(t, srverr.TimedOut(context.DeadlineExceeded), "the driver's own timeout is not the server's")
}

// nopHook is a Hook that only lets an operation exist.
type nopHook struct{}

func (nopHook) OperationStart(ctx context.Context, _ *patterns.Operation) context.Context { return ctx }
func (nopHook) OperationEvent(context.Context, *patterns.Operation, patterns.Event)       {}
func (nopHook) OperationEnd(context.Context, *patterns.Operation)                         {}

// TestRetryReportsOnlyWritesSentAgain: Retry reports a retry to the
// operation of ctx as it sends the write again, after the backoff; a
// context that ends during the backoff sends nothing more and reports no
// retry (issue 37's attack: it reported one before the backoff).
func TestRetryReportsOnlyWritesSentAgain(t *testing.T) {
	ctx, op := patterns.StartOperation(context.Background(), nopHook{}, patterns.OperationInfo{Package: "test", Name: "Write"})
	n := 0
	require.NoError(t, srverr.Retry(ctx, func() error {
		if n++; n < 3 {
			return deadlock
		}
		return nil
	}))
	require.Equal(t, 2, op.Retries(), "two writes sent again")

	ctx, op = patterns.StartOperation(context.Background(), nopHook{}, patterns.OperationInfo{Package: "test", Name: "Write"})
	ctx, cancel := context.WithCancel(ctx)
	err := srverr.Retry(ctx, func() error { cancel(); return deadlock })
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, op.Retries(), "the context ended in the backoff: nothing sent again")
}

// bulkFailure is the exception of an unordered bulk write whose
// statements at the indexes (of the command) failed with the errors.
func bulkFailure(errs map[int]mongo.WriteError) error {
	var bwe mongo.BulkWriteException
	for i := range 10 {
		if we, ok := errs[i]; ok {
			we.Index = i
			bwe.WriteErrors = append(bwe.WriteErrors, mongo.BulkWriteError{WriteError: we})
		}
	}
	return bwe
}

// TestRetryStatements: a write of several statements sends again only
// those that failed with a transient error, named by their index in the
// command that failed; a statement's other error stops it, unless failed
// takes it; a command that failed whole is sent again whole.
func TestRetryStatements(t *testing.T) {
	ctx := context.Background()
	dead := mongo.WriteError{Code: 16908292, Message: "deadlock detected"}
	dup := mongo.WriteError{Code: 11000, Message: "E11000 duplicate key error"}
	var applied []int
	run := func(n int, failed func(int, mongo.WriteError) bool, replies ...error) ([][]int, error) {
		var sent [][]int
		applied = nil
		err := srverr.RetryStatements(ctx, n, func(todo []int) error {
			sent = append(sent, slices.Clone(todo))
			if len(sent) > len(replies) {
				return nil
			}
			return replies[len(sent)-1]
		}, func(done []int) { applied = append(applied, done...) }, failed)
		return sent, err
	}

	sent, err := run(4, nil, bulkFailure(map[int]mongo.WriteError{1: dead, 3: dead}), bulkFailure(map[int]mongo.WriteError{1: dead}))
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1, 2, 3}, {1, 3}, {3}}, sent, "the failed statements alone, by their index in the command")
	require.Equal(t, []int{0, 2, 1, 3}, applied, "applied: those each reply does not name, by their index in the write")

	sent, err = run(3, nil, deadlock)
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1, 2}, {0, 1, 2}}, sent, "a command that failed whole is sent again whole")
	require.Equal(t, []int{0, 1, 2}, applied, "a command that failed whole applied nothing")

	_, err = run(2, nil, mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}})
	require.Error(t, err)
	require.Empty(t, applied, "after a write concern error what applied is unknown")

	sent, err = run(3, nil, bulkFailure(map[int]mongo.WriteError{0: dup, 2: dead}))
	require.True(t, mongo.IsDuplicateKeyError(err), "the exception: %v", err)
	require.Equal(t, [][]int{{0, 1, 2}}, sent, "another error stops the write, the transient one unsent")

	var taken []int
	sent, err = run(3, func(i int, we mongo.WriteError) bool {
		taken = append(taken, i)
		return we.Code != 11000
	}, bulkFailure(map[int]mongo.WriteError{0: dead, 1: dead}), bulkFailure(map[int]mongo.WriteError{1: dup}))
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1, 2}, {0, 1}}, sent)
	require.Equal(t, []int{1}, taken, "failed sees the statement's index in the write")

	replies := make([]error, srverr.Attempts)
	for i := range replies {
		replies[i] = bulkFailure(map[int]mongo.WriteError{0: dead})
	}
	sent, err = run(2, nil, replies...)
	require.True(t, srverr.Transient(err))
	require.Len(t, sent, srverr.Attempts, "bounded")

	sent, err = run(2, nil, mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Index: 5, Code: 16908292}}}})
	require.Error(t, err)
	require.Len(t, sent, 1, "a reply that names no statement of the command is not sent again")
	require.Empty(t, applied, "nor says which applied")
}
