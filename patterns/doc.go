// Package patterns holds what every mongopatterns repository shares and an
// application uses: the sentinel errors ([ErrNotFound], [ErrConflict],
// [ErrInvalid], [ErrUnsupported], [ErrTooLarge]), server capability
// detection ([Capabilities], [Server], [Feature]), index declarations
// ([Index], [EnsureIndexes]) and the check of ids taken from requests
// ([ValidateID]).
//
// A repository asks [Capabilities] once, when it is built or first used, and
// picks its path from the answer: the native path where the server has the
// feature (one atomic update on MongoDB 6.0+), a documented portable path
// where it does not, or an [*UnsupportedError] naming the missing feature.
// It is never silently weaker. Each [Feature] constant says which servers
// lack the feature or get it wrong, and how.
//
// Errors of every package read "<package>: <Operation>: <what>: <cause>"
// and wrap one of the sentinels, so callers test them with [errors.Is]:
//
//	if errors.Is(err, patterns.ErrNotFound) { ... }
package patterns
