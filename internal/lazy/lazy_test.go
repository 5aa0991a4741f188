package lazy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestValue(t *testing.T) {
	ctx := context.Background()
	var v lazy.Value[int]
	var calls atomic.Int32
	boom := errors.New("boom")

	_, err := v.Get(ctx, func(context.Context) (int, error) { calls.Add(1); return 0, boom })
	require.ErrorIs(t, err, boom)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			x, err := v.Get(ctx, func(context.Context) (int, error) { calls.Add(1); return 42, nil })
			require.NoError(t, err)
			require.Equal(t, 42, x)
		})
	}
	wg.Wait()
	require.EqualValues(t, 2, calls.Load(), "a failure is not kept; one success is computed once")

	v.Set(7)
	x, err := v.Get(ctx, func(context.Context) (int, error) { t.Fatal("computed after Set"); return 0, nil })
	require.NoError(t, err)
	require.Equal(t, 7, x)
}

// pushPlan is a plan of one feature.
type pushPlan bool

func (p pushPlan) Path() (string, []patterns.Feature) {
	return lazy.Path(lazy.Use{Feature: patterns.FeaturePushModifiers, Relies: bool(p)})
}

func TestDecideKeepsNoFailedDetection(t *testing.T) {
	var v lazy.Value[pushPlan]
	planFor := func(s *patterns.Server) pushPlan { return pushPlan(s.Has(patterns.FeaturePushModifiers)) }
	_, err := lazy.Decide(context.Background(), &v, nil, planFor)
	require.ErrorIs(t, err, patterns.ErrInvalid, "no client: the detection fails")
	v.Set(true)
	got, err := lazy.Decide(context.Background(), &v, nil, planFor)
	require.NoError(t, err)
	require.True(t, bool(got), "a decided plan is kept and the server is not asked again")
}

// TestDecideNamesThePathOfTheOperation: the operation the context carries
// records the plan's path and features; without one nothing is recorded.
func TestDecideNamesThePathOfTheOperation(t *testing.T) {
	for _, relies := range []bool{true, false} {
		var v lazy.Value[pushPlan]
		v.Set(pushPlan(relies))
		ctx, op := patterns.StartOperation(context.Background(), recorder{}, patterns.OperationInfo{Package: "subset", Name: "Add"})
		_, err := lazy.Decide(ctx, &v, nil, nil)
		require.NoError(t, err)
		if relies {
			require.Equal(t, "native", op.Plan)
			require.Equal(t, []patterns.Feature{patterns.FeaturePushModifiers}, op.Features)
		} else {
			require.Equal(t, "portable", op.Plan)
			require.Empty(t, op.Features)
		}
	}
}

type recorder struct{}

func (recorder) OperationStart(ctx context.Context, _ *patterns.Operation) context.Context {
	return ctx
}
func (recorder) OperationEvent(context.Context, *patterns.Operation, patterns.Event) {}
func (recorder) OperationEnd(context.Context, *patterns.Operation)                   {}
