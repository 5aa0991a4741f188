// Package lazy holds what a repository decides about its server on first
// use, such as its path (native or portable).
package lazy

import (
	"context"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Value is a value computed on first use and kept. The zero Value is
// ready to use and safe for concurrent use.
type Value[T any] struct {
	mu sync.Mutex
	p  atomic.Pointer[T]
}

// Get returns the value, computing it with compute on the first call
// that succeeds; later calls return it without calling compute.
// Concurrent first callers wait for one computation. A failed computation
// (the server unreachable, say) is not kept: the next call computes again.
func (v *Value[T]) Get(ctx context.Context, compute func(context.Context) (T, error)) (T, error) {
	if p := v.p.Load(); p != nil {
		return *p, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if p := v.p.Load(); p != nil {
		return *p, nil
	}
	x, err := compute(ctx)
	if err != nil {
		return x, err
	}
	v.p.Store(&x)
	return x, nil
}

// Known returns the value if it was computed (or Set), without computing
// it.
func (v *Value[T]) Known() (T, bool) {
	if p := v.p.Load(); p != nil {
		return *p, true
	}
	var zero T
	return zero, false
}

// Set stores x in place of any computed value; tests use it to force a
// path.
func (v *Value[T]) Set(x T) { v.p.Store(&x) }

// Forget drops the value kept, if any: the next Get computes it again.
// A repository uses it when what it learnt may no longer hold.
func (v *Value[T]) Forget() { v.p.Store(nil) }

// Decide returns v's value, computing it on first use as planFor of the
// server behind client, as [patterns.Capabilities] reports it (two
// commands to the admin database, once per client). It is how a
// repository decides its plan once: a failed detection is not kept.
// A context that carries a transaction is refused first ([txn.Refuse]):
// the operations that decide their plan before they send anything are
// refused there.
//
// The operation ctx carries, if any ([patterns.OperationFrom]: a
// repository with a [patterns.Hook]), records the plan's path.
func Decide[P Plan](ctx context.Context, v *Value[P], client *mongo.Client, planFor func(*patterns.Server) P) (P, error) {
	if err := txn.Refuse(ctx); err != nil {
		var zero P
		return zero, err
	}
	p, err := v.Get(ctx, func(ctx context.Context) (P, error) {
		srv, err := patterns.Capabilities(ctx, client)
		if err != nil {
			var zero P
			return zero, err
		}
		return planFor(srv), nil
	})
	if op := patterns.OperationFrom(ctx); op != nil && err == nil && op.Plan == "" {
		op.SetPlan(p.Path()) // once per operation: Path builds its features' slice
	}
	return p, err
}

// Plan is a repository's plan, which names its path for a
// [patterns.Hook] (see [patterns.Operation].Plan): Path returns
// [Path] of the features the plan may rely on.
type Plan interface {
	Path() (string, []patterns.Feature)
}

// Use is a feature a plan may rely on, and whether it does.
type Use struct {
	Feature patterns.Feature
	Relies  bool
}

// Path names a plan: "native" when it relies on every feature it may
// use, else "portable"; and the features it relies on.
func Path(uses ...Use) (string, []patterns.Feature) {
	path, features := "native", make([]patterns.Feature, 0, len(uses))
	for _, u := range uses {
		if u.Relies {
			features = append(features, u.Feature)
		} else {
			path = "portable"
		}
	}
	return path, features
}
