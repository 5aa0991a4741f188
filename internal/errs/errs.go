// Package errs builds the errors of mongopatterns in its one format:
//
//	<package>: <Operation>: <what>: <cause>
//
// for example "subset: New: nil database: invalid", where the cause is a
// sentinel of package patterns (or an error wrapping one), so that callers
// test it with errors.Is.
package errs

import (
	"fmt"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Invalid returns "<what>: invalid", wrapping [patterns.ErrInvalid]; the
// arguments format <what> as fmt.Sprintf does.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), patterns.ErrInvalid)
}

// TooLarge returns "<what>: document too large", wrapping
// [patterns.ErrTooLarge].
func TooLarge(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), patterns.ErrTooLarge)
}

// Prefix is a package's name, which starts each of its errors.
type Prefix string

// Wrap returns err as "<package>: <op>: <err>", wrapping it; nil stays nil.
func (p Prefix) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", p, op, err)
}
