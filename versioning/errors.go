package versioning

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Errors of this package, tested with [errors.Is]. Repository methods wrap
// them with the operation, the document and the collection.
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

// Error names the versions and the cause, then [ErrMigration]. The
// repository's methods wrap it with the operation and the document.
func (e *MigrationError) Error() string {
	return fmt.Sprintf("from version %d to %d: %v: %v", e.From, e.To, e.Err, ErrMigration)
}

// Unwrap returns [ErrMigration] and the cause.
func (e *MigrationError) Unwrap() []error { return []error{ErrMigration, e.Err} }

// newer is the error for a document at version v, newer than this code.
func (s schema) newer(v int) error {
	return fmt.Errorf("stored at version %d, this code knows up to %d: %w", v, s.current, ErrNewerSchema)
}

// notFound is the error for a document that does not exist.
func notFound() error {
	return fmt.Errorf("no such document: %w", patterns.ErrNotFound)
}

// ofDoc says which document of the collection err is about, and adds to a
// server's error the sentinel its kind matches ([srverr.Classify]).
func (r *Repo[T]) ofDoc(id any, err error) error {
	return fmt.Errorf("document %s of %s: %w", describe(id), r.coll.Name(), srverr.Classify(err))
}

// ofColl says which collection err is about, as ofDoc does.
func (r *Repo[T]) ofColl(err error) error {
	return fmt.Errorf("collection %s: %w", r.coll.Name(), srverr.Classify(err))
}

// describe is how errors name a document id: strings quoted, other values
// as fmt prints them (an ObjectID as ObjectID("...")).
func describe(id any) string {
	switch v := id.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case bson.RawValue:
		var x any
		if v.Unmarshal(&x) == nil {
			return describe(x)
		}
		return v.String()
	}
	return fmt.Sprint(id)
}
