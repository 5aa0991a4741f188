// Package txn holds the one rule of the pattern repositories about the
// caller's session: a context that carries a transaction is refused, a
// session without one is joined.
package txn

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Refuse returns an error wrapping patterns.ErrInvalid when ctx carries a
// session with a transaction in progress (or starting: the driver starts
// it with the first command, so nothing has been sent yet), and nil
// otherwise. It sends nothing.
//
// Each operation of a repository is its own atomic step, or a sequence of
// them with retries of their own (a compare-and-set retried, a transient
// error sent again), and says what a reader sees between them; inside a
// transaction they would become one all-or-nothing unit that a single
// write conflict aborts, and their retries would fail in the aborted
// transaction. A session without a transaction is joined: the commands
// carry its id, so causal consistency and its cluster time hold.
func Refuse(ctx context.Context) error {
	if s := mongo.SessionFromContext(ctx); s != nil && s.TransactionRunning() {
		return errs.Invalid("the context carries a transaction: each operation of a repository is its own atomic step (or steps, with retries of their own) and joins none; call it outside the transaction")
	}
	return nil
}
