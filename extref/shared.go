package extref

import (
	"context"
	"slices"
	"sync"
)

// shared coalesces the syncs of one source that concurrent callers of one
// [Ref] ask for (Update after its findAndModify, Sync, Repair, Watch), so
// that they do not fight over the same target documents: one sync of a
// source runs at a time, and every caller that asked while it ran is
// served by the next one, which reads the source after their changes. N
// concurrent Updates of one source then cost N findAndModify and about two
// syncs, instead of N syncs whose updateManys lock the same documents in
// different orders (FerretDB 2.x answers "deadlock detected") and whose
// confirming reads each see the others' changes and write again.
type shared struct {
	mu      sync.Mutex
	sources map[string]*flight // by the source's id (bsonid.Key)
}

// flight is the state of the syncs of one source: tickets are handed out
// in order, and a round that starts after ticket n was handed out serves
// every ticket up to n once it succeeds.
type flight struct {
	users   int           // callers holding the flight, to forget it at 0
	asked   uint64        // the last ticket handed out
	served  uint64        // every ticket up to it is served
	running chan struct{} // closed when the running round ends; nil when none runs
	counts  []Count       // what the last round that succeeded wrote
}

// syncShared syncs the source with _id id (its bsonid.Key is key) as
// [Ref.converge] does, shared with the concurrent callers for the same
// source: it returns once a round that started after the call has written
// and confirmed the copies, with that round's counts. The caller that
// runs a round (when none runs) uses c, the source's value it has just
// read or written, when no other call waits, else reads the source (as it
// does when c is nil). A round that fails fails only the call that ran
// it (with its own ctx); the calls it would have served run the next
// one. A call whose ctx ends while it waits returns ctx's error.
func (r *Ref[S]) syncShared(ctx context.Context, p plan, id any, key string, c *copyValue) ([]Count, error) {
	sh := &r.shared
	sh.mu.Lock()
	if sh.sources == nil {
		sh.sources = map[string]*flight{}
	}
	f := sh.sources[key]
	if f == nil {
		f = &flight{}
		sh.sources[key] = f
	}
	f.users++
	f.asked++
	ticket := f.asked
	defer func() {
		sh.mu.Lock()
		if f.users--; f.users == 0 {
			delete(sh.sources, key)
		}
		sh.mu.Unlock()
	}()
	for {
		if f.served >= ticket {
			counts := slices.Clone(f.counts)
			sh.mu.Unlock()
			return counts, nil
		}
		if f.running == nil {
			alone := ticket == f.asked && f.served == ticket-1
			upTo, done := f.asked, make(chan struct{})
			f.running = done
			sh.mu.Unlock()
			counts, err := r.round(ctx, p, id, c, alone)
			sh.mu.Lock()
			f.running = nil
			close(done)
			if err != nil {
				sh.mu.Unlock()
				return counts, err
			}
			f.served, f.counts = upTo, counts
			continue
		}
		done := f.running
		sh.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sh.mu.Lock()
	}
}

// round is one sync of syncShared: with c's value when the call is alone
// and has one, else with the source read now.
func (r *Ref[S]) round(ctx context.Context, p plan, id any, c *copyValue, alone bool) ([]Count, error) {
	if c == nil || !alone {
		_, v, err := r.load(ctx, id)
		if err != nil {
			return nil, err
		}
		c = &v
	}
	return r.converge(ctx, p, id, *c)
}
