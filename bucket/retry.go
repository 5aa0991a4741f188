package bucket

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
)

// A retry of AddMany (see "Errors and retrying" in [Buckets.AddMany]): a
// call that fails after it wrote, or may have written, leaves a record of
// the measurements it stored and of the statements of unknown outcome; a
// later call of the same measurements on the same collection, in the same
// process, takes the record, counts the first as stored without sending
// or reading anything for them, reads which of the statements applied,
// and sends the others again as they were, before it stores the rest.
//
// What the failed call stored is not looked for: it may be gone since
// (DeleteBefore, a TTL index), and sending it again would bring back what
// was removed.

// record is what a failed AddMany call leaves for its retry.
type record struct {
	stored  []int           // the measurements stored, indexes of the points
	unknown []sentStatement // the statements whose outcome is unknown
}

// size is the number of measurements the record names.
func (r *record) size() int {
	n := len(r.stored)
	for _, st := range r.unknown {
		n += len(st.pts)
	}
	return n
}

// The bounds of the journal of failed calls: the most calls it remembers,
// and the most measurements their records name in all (each costs a few
// bytes); past either, the oldest record goes.
const (
	journalCalls  = 256
	journalPoints = 1 << 20
)

// failedCalls is the journal of the process's failed AddMany calls.
var failedCalls = newJournal()

// journal remembers the records of failed AddMany calls, by a digest of
// their collection and measurements, oldest first. It is safe for
// concurrent use.
type journal struct {
	mu     sync.Mutex
	byKey  map[string]*list.Element // of *journalEntry
	order  list.List                // oldest first
	points int
	n      atomic.Int32 // records held: 0 spares a call the digest
}

type journalEntry struct {
	key    string
	rec    *record
	points int
}

func newJournal() *journal { return &journal{byKey: map[string]*list.Element{}} }

// active reports whether the journal holds a record.
func (j *journal) active() bool { return j.n.Load() > 0 }

// take removes and returns the record of key, nil when there is none.
func (j *journal) take(key string) *record {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.byKey[key]
	if !ok {
		return nil
	}
	j.remove(e)
	return e.Value.(*journalEntry).rec
}

// put records rec under key, replacing any record of key, and forgets
// the oldest records past the journal's bounds.
func (j *journal) put(key string, rec *record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e, ok := j.byKey[key]; ok {
		j.remove(e)
	}
	entry := &journalEntry{key: key, rec: rec, points: rec.size()}
	j.byKey[key] = j.order.PushBack(entry)
	j.points += entry.points
	for j.order.Len() > journalCalls || (j.points > journalPoints && j.order.Len() > 1) {
		j.remove(j.order.Front())
	}
	j.n.Store(int32(j.order.Len()))
}

func (j *journal) remove(e *list.Element) {
	entry := j.order.Remove(e).(*journalEntry)
	delete(j.byKey, entry.key)
	j.points -= entry.points
	j.n.Store(int32(j.order.Len()))
}

// key is the digest of the call's collection and measurements, in order:
// a retry sends the same ones.
func (w *manyWrite) key() string {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write([]byte(w.s.coll.Database().Name()))
	write([]byte(w.s.coll.Name()))
	for i := range w.pts {
		m := w.groups[w.groupOf[i]].meta
		h.Write([]byte{byte(m.Type)})
		write(m.Value)
		write(w.pts[i].raw)
	}
	return string(h.Sum(nil))
}

// resume completes earlier, the record of a failed call of the same
// measurements. It marks the measurements that call stored as stored,
// without a look at their buckets (which may be gone since). It reads
// which of the statements of unknown outcome applied, and marks their
// measurements stored; it sends the others again as they were, a new
// bucket as an upsert by its _id, so that each applies once even if its
// first send is still on its way to the server: a top-up and an upsert
// carry their id in the bucket's writes (a top-up's guard refuses a
// bucket that holds it), a new bucket its _id. A top-up refused then lost
// its room, or its first send applied meanwhile; a new bucket refused
// with a duplicate key met its first send, landing during the upsert
// (which matched nothing, then found the _id taken): it reads those
// again. What is left goes to the rounds.
func (w *manyWrite) resume(ctx context.Context, limit int, earlier *record) error {
	// The same measurements make the same groups; a record that does not
	// fit (not possible but by a digest collision) is dropped.
	outside := func(at int) bool { return at < 0 || at >= len(w.pts) }
	if !slices.ContainsFunc(earlier.stored, outside) {
		for _, at := range earlier.stored {
			if w.state[at] == pending {
				w.state[at] = stored
				w.stored = true
			}
		}
	}
	var sts []sentStatement
	for _, st := range earlier.unknown {
		if w.byKey[st.key] != nil && !slices.ContainsFunc(st.pts, outside) {
			sts = append(sts, st)
		}
	}
	applied, err := w.applied(ctx, sts)
	if err != nil {
		for _, st := range sts {
			w.settled(st, uncertain)
		}
		return err
	}
	again := make([]statement, 0, len(sts))
	for _, st := range sts {
		if applied[st.id] {
			w.settled(st, stored)
			continue
		}
		if st.kind == insert {
			st.kind = reinsert
		}
		again = append(again, w.statement(w.byKey[st.key], st))
		again[len(again)-1].again = true
	}
	r := rounds{lost: map[*group]bool{}, conflicted: map[*group]error{}}
	err = w.send(ctx, again, limit, &r)
	if err == nil && len(r.refused) > 0 {
		if applied, err = w.applied(ctx, r.refused); err == nil {
			for _, st := range r.refused {
				if applied[st.id] {
					w.settled(st, stored)
				}
			}
		}
	}
	if err != nil {
		// A statement not sent, or refused and not read again, may still
		// apply from its first send.
		for _, st := range again {
			if w.state[st.pts[0]] == pending {
				w.settled(st.sentStatement, uncertain)
			}
		}
		return err
	}
	w.settle(&r)
	return nil
}

// applied reads which of the statements sts wrote to their buckets: one
// find of the buckets of their windows that hold their ids (one per 1,000
// windows).
func (w *manyWrite) applied(ctx context.Context, sts []sentStatement) (map[bson.ObjectID]bool, error) {
	at := map[windowKey]int{}
	var ws []window
	asked := map[bson.ObjectID]bool{}
	for _, st := range sts {
		i, ok := at[st.key]
		if !ok {
			i = len(ws)
			at[st.key] = i
			ws = append(ws, window{meta: w.byKey[st.key].meta, start: st.key.start})
		}
		ws[i].writes = append(ws[i].writes, st.id)
		asked[st.id] = true
	}
	found := map[bson.ObjectID]bool{}
	for chunk := range slices.Chunk(ws, maxSeriesPerRead) {
		open := func(ctx context.Context) (*mongo.Cursor, error) {
			return w.s.coll.Find(ctx, w.s.writtenFilter(chunk), options.Find().
				SetProjection(writesProjection()).SetBatchSize(readBatch))
		}
		for doc, err := range seq.Cursor[bson.Raw](ctx, open) {
			if err != nil {
				return nil, srverr.Classify(err)
			}
			arr, _ := doc.Lookup(fieldWrites).ArrayOK()
			vals, _ := arr.Values()
			for _, v := range vals {
				if id, ok := v.ObjectIDOK(); ok && asked[id] {
					found[id] = true
				}
			}
		}
	}
	return found, nil
}
