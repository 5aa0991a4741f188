package srverr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// accounting is what subset's insertOnce records of one batch: the
// indexes it inserted, and the operation's document count (Documents).
type accounting struct {
	inserted []int
	docs     int64
	known    bool
}

// oldInsertOnce is the parent commit's (ac81a33^) subset insertOnce
// accounting, verbatim but for the InsertMany: it parsed the reply inside
// send and called op.Affected(n) once per reply it could read, n = 0
// included.
func oldInsertOnce(n int, replies []error) (accounting, error) {
	op := &patterns.Operation{}
	var acc accounting
	sends := 0
	err := srverr.RetryStatements(context.Background(), n, func(todo []int) error {
		var err error
		if sends < len(replies) {
			err = replies[sends]
		}
		sends++
		failed := make([]bool, len(todo))
		if bwe, ok := errors.AsType[mongo.BulkWriteException](err); ok && bwe.WriteConcernError == nil {
			for _, we := range bwe.WriteErrors {
				if we.Index < 0 || we.Index >= len(todo) {
					return err // which applied is unknown
				}
				failed[we.Index] = true
			}
		} else if err != nil {
			return err
		}
		k := 0
		for j, i := range todo {
			if !failed[j] {
				acc.inserted = append(acc.inserted, i)
				k++
			}
		}
		op.Affected(int64(k))
		return err
	}, nil, func(i int, we mongo.WriteError) bool { return !mongo.IsDuplicateKeyError(we) })
	acc.docs, acc.known = op.Documents()
	return acc, err
}

// newInsertOnce is insertOnce's accounting through applied, which it
// hears once per reply that says which statements applied (none,
// possibly): Affected(0) then, as before ac81a33.
func newInsertOnce(n int, replies []error) (accounting, error) {
	op := &patterns.Operation{}
	var acc accounting
	sends := 0
	err := srverr.RetryStatements(context.Background(), n, func(todo []int) error {
		var err error
		if sends < len(replies) {
			err = replies[sends]
		}
		sends++
		return err
	}, func(done []int) {
		acc.inserted = append(acc.inserted, done...)
		op.Affected(int64(len(done)))
	}, func(i int, we mongo.WriteError) bool { return !mongo.IsDuplicateKeyError(we) })
	acc.docs, acc.known = op.Documents()
	return acc, err
}

// TestAttack57InsertAccountingEquivalent: ac81a33 says subset's insert
// "no longer reads the bulk write's error indexes a second time to
// record which items it inserted", a refactoring. The old insertOnce
// called op.Affected(n) for every reply it could read, n = 0 included,
// so an Add whose insert applied none of its statements (every item
// already stored: an Add sent again after it succeeded; or every
// statement failing with FerretDB's deadlock Attempts times) reported
// Documents() = (0, true); with applied the operation never hears of
// that reply, and reports the count unknown, as a read does
// ("Documents ... and whether it is known: a read writes none and
// reports none", patterns/hook.go).
func TestAttack57InsertAccountingEquivalent(t *testing.T) {
	dead := mongo.WriteError{Code: 16908292, Message: "deadlock detected"}
	dup := mongo.WriteError{Code: 11000, Message: "E11000 duplicate key error"}
	for _, row := range []struct {
		name    string
		n       int
		replies []error
	}{
		{"success", 3, nil},
		{"partial: a duplicate and a transient one", 3, []error{bulkFailure(map[int]mongo.WriteError{0: dup, 2: dead})}},
		{"write concern error", 2, []error{mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}}},
		{"index out of range", 2, []error{mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Index: 5, Code: 11000}}}}}},
		{"command error, then success", 2, []error{deadlock}},
		{"every item stored already (all duplicates)", 2, []error{bulkFailure(map[int]mongo.WriteError{0: dup, 1: dup})}},
		{"every statement deadlocked Attempts times", 1, []error{deadlockInBulk, deadlockInBulk, deadlockInBulk, deadlockInBulk, deadlockInBulk}},
	} {
		t.Run(row.name, func(t *testing.T) {
			old, oldErr := oldInsertOnce(row.n, row.replies)
			neu, newErr := newInsertOnce(row.n, row.replies)
			require.Equal(t, fmt.Sprint(oldErr), fmt.Sprint(newErr), "the error")
			require.Equal(t, old, neu, "inserted and Documents() of the old insertOnce, then of the new")
		})
	}
}

// TestAttack57AppliedPromises: RetryStatements' godoc, as the attack
// left it: send is an unordered write (an ordered one stops at its first
// failed statement, and the reply does not name those that never ran:
// the attack's row for it is gone with the promise), and applied hears
// of none after "an exception naming a statement that was not sent"
// (the attack found the godoc promising the others applied).
func TestAttack57AppliedPromises(t *testing.T) {
	dup := mongo.WriteError{Code: 11000, Message: "E11000 duplicate key error"}
	for _, row := range []struct {
		name  string
		n     int
		reply error
		want  []int
	}{
		{"unordered: the statements not named", 3, bulkFailure(map[int]mongo.WriteError{1: dup}), []int{0, 2}},
		// A BulkWriteException without a write concern error whose
		// index 0 is in range, its other index out of range: the reply
		// does not say which failed, and applied hears of none.
		{"index out of range beside one in range", 2, mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{
			{WriteError: mongo.WriteError{Index: 0, Code: 11000}}, {WriteError: mongo.WriteError{Index: 5, Code: 11000}}}}, nil},
	} {
		t.Run(row.name, func(t *testing.T) {
			var applied []int
			_ = srverr.RetryStatements(context.Background(), row.n, func([]int) error { return row.reply },
				func(done []int) { applied = append(applied, done...) }, func(int, mongo.WriteError) bool { return true })
			require.Equal(t, row.want, applied)
		})
	}
}
