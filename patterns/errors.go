package patterns

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by every pattern package. Repositories wrap them
// with %w and say what failed and where, so callers test them with
// [errors.Is]:
//
//	if errors.Is(err, patterns.ErrNotFound) { ... }
var (
	// ErrNotFound: the document an operation needs (a parent, a source, an
	// item) does not exist.
	ErrNotFound = errors.New("not found")

	// ErrConflict: an optimistic-concurrency write (a compare-and-set on a
	// version or an old value) kept losing to concurrent writers and the
	// repository gave up after its retries. Nothing was half-written; the
	// caller may retry the whole operation.
	ErrConflict = errors.New("conflict with a concurrent writer")

	// ErrInvalid: bad configuration (at construction) or bad input (at a
	// call). Nothing was written.
	ErrInvalid = errors.New("invalid")

	// ErrUnsupported: the server lacks a feature the operation needs and no
	// portable path exists. The error is an [*UnsupportedError] naming the
	// feature and the server.
	ErrUnsupported = errors.New("unsupported by the server")

	// ErrTooLarge: a write would make a document larger than
	// [MaxDocumentSize], and it was not made. A single-write operation
	// wrote nothing; an operation of several steps says in its
	// documentation what its earlier steps may have written (subset's
	// Update replaces the item before it finds the subset cannot hold it).
	ErrTooLarge = errors.New("document too large")
)

// UnsupportedError reports that a server lacks a [Feature]. It matches
// [ErrUnsupported] with [errors.Is].
type UnsupportedError struct {
	Feature Feature // what is missing
	Server  string  // the server that lacks it, for example "FerretDB 7.0.42 (standalone)"
}

// Error says which feature is missing on which server.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: %s lacks %s", ErrUnsupported, e.Server, e.Feature)
}

// Unwrap returns [ErrUnsupported].
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }
