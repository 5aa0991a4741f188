package outlier

import (
	"context"
	"sync"
)

// parentLocks runs one holder at a time per parent, within a repository.
// The zero value is ready to use. Entries live while someone holds or
// waits for them, so memory is bounded by the callers in flight.
type parentLocks struct {
	mu sync.Mutex
	m  map[string]*parentLock
}

type parentLock struct {
	token chan struct{} // holds a value while the parent is locked
	refs  int           // holders and waiters
}

// lock waits until the parent whose id has the key (see bsonid.Key) is
// free, or ctx ends, and returns the function that frees it.
func (l *parentLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*parentLock{}
	}
	p := l.m[key]
	if p == nil {
		p = &parentLock{token: make(chan struct{}, 1)}
		l.m[key] = p
	}
	p.refs++
	l.mu.Unlock()
	select {
	case p.token <- struct{}{}:
		return func() {
			<-p.token
			l.release(key, p)
		}, nil
	case <-ctx.Done():
		l.release(key, p)
		return nil, ctx.Err()
	}
}

func (l *parentLocks) release(key string, p *parentLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.refs--; p.refs == 0 {
		delete(l.m, key)
	}
}
