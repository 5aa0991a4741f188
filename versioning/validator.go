package versioning

import "github.com/mongopatterns/mongopatterns/validation"

// Validator returns the collection validator of the repository: the
// schema of T (validation.For[T] with opts), checked only on documents
// at the current version (the version field equal to Config.Current, or
// missing when Config.Implicit is Current). A document at an older
// version passes as it is, so a collection in the middle of a migration
// can run under validationAction "error": Get's write-back and
// MigrateAll write the current version, which the validator checks,
// while the documents not yet migrated stay valid. A document at a
// newer version (written by a newer release) passes too: that release's
// validator is the one that knows its shape. Set it with
// [validation.Apply]; measure it first with [validation.Check].
//
// What Get and MigrateAll write back is T's encoding of the migrated
// document (see [Repo.Get]), which the validator describes: a migration
// need not produce every field T always writes, nor in T's BSON types.
//
// The version and revision fields are declared as the repository writes
// them, whatever T's fields of those names are (an int32 and an
// ObjectID, see [validation.Stamped]), and not required; the _id that
// Insert of a T without one gets from the driver (an ObjectID) is
// admitted (see [validation.For]). Errors are
// those of [validation.For], prefixed "versioning: Validator: ", and
// ErrInvalid for opts that constrain either field. It sends nothing.
func (r *Repo[T]) Validator(opts ...validation.Option) (*validation.Validator, error) {
	// The repository stamps these two itself, whatever T holds there
	// (stampDoc): the validator must take what it writes.
	stamps := []validation.Option{validation.Stamped(r.field, "int"), validation.Stamped(r.revField, "objectId")}
	v, err := validation.For[T](append(stamps, opts...)...)
	if err != nil {
		return nil, pkg.Wrap("Validator", err)
	}
	current := []any{int32(r.current)}
	if r.implicit == r.current {
		current = append(current, nil)
	}
	v, err = v.Only(r.field, current...)
	if err != nil {
		return nil, pkg.Wrap("Validator", err)
	}
	return v, nil
}
