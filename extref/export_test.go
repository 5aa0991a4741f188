package extref

import "context"

// ForcePortable makes r take the paths of a server without arrayFilters
// and transactions, whatever its server has, so that tests exercise the
// portable paths on MongoDB too.
func ForcePortable[S any](ctx context.Context, r *Ref[S]) error {
	m, err := r.detect(ctx)
	if err != nil {
		return err
	}
	r.mode.Set(&mode{srv: m.srv, projectUpdate: m.projectUpdate})
	return nil
}

// SetAfterScan sets the hook that the portable array path runs between
// reading documents and writing them.
func SetAfterScan[S any](r *Ref[S], f func(context.Context)) { r.afterScan = f }
