package outlier

import (
	"context"
	"sync"
)

// parentLocks runs one holder at a time per parent, within a repository.
// The zero value is ready to use. Entries live while someone holds or
// waits for them, so memory is bounded by the callers in flight; they are
// recycled, so that taking a free lock allocates nothing.
type parentLocks struct {
	mu sync.Mutex
	m  map[string]*parentLock
}

type parentLock struct {
	token chan struct{} // holds a value while the parent is locked
	refs  int           // holders and waiters; guarded by parentLocks.mu
}

var lockPool = sync.Pool{New: func() any { return &parentLock{token: make(chan struct{}, 1)} }}

// lock waits until the parent whose id has the key (see bsonid.Key) is
// free, or ctx ends, and returns the lock to give to unlock.
func (l *parentLocks) lock(ctx context.Context, key string) (*parentLock, error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*parentLock{}
	}
	p := l.m[key]
	if p == nil {
		p = lockPool.Get().(*parentLock)
		l.m[key] = p
	}
	p.refs++
	l.mu.Unlock()
	select {
	case p.token <- struct{}{}:
		return p, nil
	case <-ctx.Done():
		l.release(key, p)
		return nil, ctx.Err()
	}
}

// unlock frees the parent that lock returned p for.
func (l *parentLocks) unlock(key string, p *parentLock) {
	<-p.token
	l.release(key, p)
}

func (l *parentLocks) release(key string, p *parentLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.refs--; p.refs == 0 {
		delete(l.m, key)
		lockPool.Put(p) // free: its token is empty
	}
}
