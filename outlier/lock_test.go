package outlier

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParentLocks(t *testing.T) {
	var l parentLocks
	ctx := context.Background()

	// One holder at a time per key; other keys are free.
	var mu sync.Mutex
	held := map[string]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		key := []string{"a", "b"}[i%2]
		wg.Go(func() {
			p, err := l.lock(ctx, key)
			require.NoError(t, err)
			mu.Lock()
			held[key]++
			require.Equal(t, 1, held[key], "two holders of %s", key)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			held[key]--
			mu.Unlock()
			l.unlock(key, p)
		})
	}
	wg.Wait()
	require.Empty(t, l.m, "no entry outlives its holders")

	// A waiter gives up when its context ends, and leaves nothing behind.
	p, err := l.lock(ctx, "a")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = l.lock(short, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	l.unlock("a", p)
	require.Empty(t, l.m)
}
