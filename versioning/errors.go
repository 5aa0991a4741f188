package versioning

import (
	"errors"
	"fmt"
)

// Errors of this package, tested with [errors.Is]. Repository methods wrap
// them with the collection, the operation and the document id.
var (
	// ErrNewerSchema: the stored document is at a version newer than the
	// repository's current one. It happens during a rolling deploy, when
	// old code meets documents that new code has written. Such a document
	// is never migrated, downgraded or overwritten by this code: Get and
	// Find report it, Replace and Update refuse it, MigrateAll skips it.
	ErrNewerSchema = errors.New("document schema is newer than this code knows")

	// ErrMigration: a stored document cannot be brought to the current
	// version: a migration returned an error, no migration starts at its
	// version, its version field does not hold an integer, or the migrated
	// document does not decode into the current type. The document is left
	// as it is. Errors from a migration step are a [*MigrationError].
	ErrMigration = errors.New("document cannot be migrated")
)

// MigrationError reports that the migrations of one document failed. It
// matches [ErrMigration] and its cause with [errors.Is]; get it with
// [errors.AsType]. The stored document is untouched.
type MigrationError struct {
	ID any // the document's _id
	// From and To are the versions of the step that failed: a migration
	// From→From+1, or the stored version → the current one when the
	// migrated document could not be encoded, was too large, changed its
	// _id or did not decode into the current type.
	From, To int
	Err      error // the cause
}

// Error names the versions and the cause. The repository's methods wrap
// it with the collection and the document id.
func (e *MigrationError) Error() string {
	return fmt.Sprintf("%v: from version %d to %d: %v", ErrMigration, e.From, e.To, e.Err)
}

// Unwrap returns [ErrMigration] and the cause.
func (e *MigrationError) Unwrap() []error { return []error{ErrMigration, e.Err} }
