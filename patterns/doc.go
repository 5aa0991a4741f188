// Package patterns holds what every mongopatterns repository shares: the
// sentinel errors ([ErrNotFound], [ErrConflict], [ErrInvalid],
// [ErrUnsupported], [ErrTooLarge]), server capability detection
// ([Capabilities]), index declarations ([Index], [EnsureIndexes], [ESRKey])
// and the validators for field names, paths and ids ([ValidateField],
// [ValidatePath], [ValidateID]).
//
// A repository asks [Capabilities] once, when it is built or first used, and
// picks its path from the answer: the native path where the server has the
// feature (one atomic update on MongoDB 6.0+), a documented portable path
// where it does not, or an [*UnsupportedError] naming the missing feature.
// It is never silently weaker.
package patterns
