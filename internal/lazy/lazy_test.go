package lazy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/lazy"
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
