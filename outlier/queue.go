package outlier

import (
	"context"
	"slices"
	"sync"
)

// appendQueues runs a repository's Appends to one parent one batch at a
// time: an Append that arrives while another writes to the parent waits,
// and when that write ends, one of the waiting Appends writes the items
// of all of them, in the order they arrived, as one batch. So N callers
// appending to one parent at once do not fight over it (each guarded
// write of one would make the others' miss, read again and retry; on
// FerretDB 2.x their writes to the parent and its newest overflow
// document also meet "deadlock detected"); they cost about as many
// commands as one caller appending all their items.
//
// A batch that fails fails only the call that wrote it, with its own ctx
// and its own error; the calls it carried that still wait are written
// again by the next batch, first. Writing them again is safe: Append
// skips the items already stored (by id). A call whose ctx ends while it
// waits returns ctx's error: its items are dropped if no batch took them
// yet, or, if one did, may be stored by it (as a write the caller gave up
// on), but are not written again. The zero value is ready to use; a
// parent's entry lives while calls for it are in flight.
type appendQueues struct {
	mu sync.Mutex
	m  map[string]*appendQueue // by the key of the parent's id (bsonid.Key)
}

// appendQueue is the state of one parent's Appends; guarded by
// appendQueues.mu.
type appendQueue struct {
	users   int           // calls in flight, to forget the entry at 0
	waiting []*appendCall // calls no batch has taken, in arrival order
	running bool          // a batch is being written
	wake    chan struct{} // closed when the running batch ends; nil until a call waits for it
}

// appendCall is one Append in an appendQueue.
type appendCall struct {
	items []item
	done  bool  // err is the call's outcome
	err   error // nil: its items are stored
	gone  bool  // the caller left while a batch carried its items: not written again
}

// do appends items (checked: distinct ids) to the parent whose id has
// key, through write, which appends a batch, in order, as Append does,
// and is called with the ctx of the call that writes it.
func (q *appendQueues) do(ctx context.Context, key string, items []item, write func(context.Context, []item) error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string]*appendQueue{}
	}
	a := q.m[key]
	if a == nil {
		a = queuePool.Get().(*appendQueue)
		q.m[key] = a
	}
	a.users++
	defer func() {
		if a.users--; a.users == 0 {
			delete(q.m, key)
			queuePool.Put(a) // free: nothing runs or waits
		}
	}()
	if !a.running && len(a.waiting) == 0 {
		// Alone: write the items at once (a batch of one call, whose
		// failure has no other call to write again).
		a.running = true
		q.mu.Unlock()
		err := write(ctx, items)
		q.mu.Lock()
		a.ended()
		return err
	}
	c := &appendCall{items: items}
	a.waiting = append(a.waiting, c)
	for !c.done {
		if !a.running {
			// c waits (it is not done, and no batch carries it): write it
			// and all that wait with it.
			batch := a.waiting
			a.waiting, a.running = nil, true
			q.mu.Unlock()
			err := write(ctx, batchItems(batch))
			q.mu.Lock()
			a.ended()
			if err == nil {
				for _, b := range batch {
					b.done = true
				}
				continue
			}
			c.done, c.err = true, err
			again := slices.DeleteFunc(batch, func(b *appendCall) bool { return b == c || b.gone })
			a.waiting = append(again, a.waiting...)
			continue
		}
		if a.wake == nil {
			a.wake = make(chan struct{})
		}
		wake := a.wake
		q.mu.Unlock()
		select {
		case <-wake:
			q.mu.Lock()
		case <-ctx.Done():
			q.mu.Lock()
			if c.done {
				return c.err
			}
			if i := slices.Index(a.waiting, c); i >= 0 {
				a.waiting = slices.Delete(a.waiting, i, i+1)
			} else {
				c.gone = true // a running batch carries its items
			}
			return ctx.Err()
		}
	}
	return c.err
}

// ended marks the end of the running batch and wakes the calls waiting
// for it; with appendQueues.mu held.
func (a *appendQueue) ended() {
	a.running = false
	if a.wake != nil {
		close(a.wake) // the waiting calls look again
		a.wake = nil
	}
}

// queuePool recycles the entries of appendQueues, so that an Append to a
// parent no other call is appending to allocates none.
var queuePool = sync.Pool{New: func() any { return new(appendQueue) }}

// batchItems returns the items of the calls of a batch, in order, each id
// once: an id that two calls append (overlapping Appends of one id) is
// stored once, where the first puts it.
func batchItems(batch []*appendCall) []item {
	if len(batch) == 1 {
		return batch[0].items
	}
	n := 0
	for _, b := range batch {
		n += len(b.items)
	}
	out := make([]item, 0, n)
	seen := make(map[string]bool, n)
	for _, b := range batch {
		for _, it := range b.items {
			if k := it.idKey(); !seen[k] {
				seen[k] = true
				out = append(out, it)
			}
		}
	}
	return out
}
