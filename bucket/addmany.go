package bucket

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/seq"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxLostRaces is how many top-ups of one window an AddMany call may lose
// to concurrent writers before it stores the rest of that window's
// measurements one upsert each, as Add does, which cannot lose.
const maxLostRaces = 2

// maxSeriesPerRead bounds the series one read of AddMany asks about, so
// that its filter stays small.
const maxSeriesPerRead = 1000

// readBatch is the batch size of AddMany's reads: a few buckets with room
// per window, each read as about 80 bytes, fit in the first batch.
const readBatch = 1 << 16

// AddMany stores many measurements, of any series, grouped by series and
// window: it sends one write statement per bucket it puts measurements
// in, where [Buckets.Add] would send one per measurement. The cap, the
// bucket bound and the summaries are Add's; unlike Add, it is exact to
// retry after any error (see "Errors and retrying").
//
// # How
//
// All measurements are validated first: a bad one returns
// [patterns.ErrInvalid] (or [patterns.ErrTooLarge], as Add does) naming
// its index, and nothing is written. Then, in rounds (one without
// concurrent writers):
//
//  1. One find reads the count of each bucket with room in the windows
//     written to, on the index {<meta>, start, count} (one find per 1,000
//     series).
//  2. The k measurements of each series and window top up those buckets,
//     each with as many as it has room for: one guarded upsert per bucket,
//     {_id, <meta>, start, count: {$lte: Cap - j}, writes: {$ne: id}}
//     with $push $each of its j measurements and $push of its own id to
//     the bucket's writes, $inc of the count and the sums, $min/$max of
//     first, last and the extremes. All top-ups go in one update command.
//  3. What is left goes into new buckets of Cap (the last one partial),
//     each built whole in the client, summary included, and inserted, all
//     in one insert command after the top-ups; a window whose top-ups did
//     not all hold opens none (see below).
//
// On a server without [patterns.FeatureBatchedUpdates] (FerretDB) each
// update statement is a command of its own; inserts still go together. A
// bucket's measurements from one call are in time order; readers sort
// anyway.
//
// # Statements
//
// Without other writers on its windows, AddMany sends one find and
// exactly one write per bucket it puts measurements in, in two round trips
// (three when it tops buckets up): for 1,800 measurements that fill 30
// buckets, one find and 30 inserts. Proof: for a window holding k of the
// measurements, whose buckets with room have room r1, r2, ..., the top-ups
// use the buckets one by one, each with min(ri, what is left), until the
// k are placed, one statement per bucket used; if the room runs out first,
// the ceil((k - r1 - r2 - ...)/Cap) new buckets take one insert each. Each
// statement puts measurements in a bucket no other statement of the call
// uses, so writes = buckets filled, within the bound of buckets filled +
// series touched.
//
// A concurrent writer can take the room of a bucket between the read and
// a top-up: the guard then refuses the top-up, which applies nothing (the
// upsert's insert, reusing the _id, fails with a duplicate key: that is
// how AddMany knows which). The window's measurements left go to the next
// round, which reads again and plans again; the window opens no new
// bucket until its top-ups hold. Each lost race costs one write (and the
// next round a find); after two in one window, the rest of that window
// goes one Add upsert per measurement (with its id pushed to the writes
// of the bucket it lands in), which cannot lose. A duplicate key on an
// insert or on such an upsert (a unique index on the bucket key, which
// the store must not have) is retried in the next round, up to three
// times in all, then reported as [patterns.ErrConflict]. A statement that
// FerretDB 2.x aborts on a deadlock applied nothing and is sent again at
// once, up to five times (see [srverr.Retry]). So AddMany runs at most
// five rounds (and a retry, first, when its record holds statements of
// unknown outcome: one find, one round of the statements it sends again,
// and a find of those the guard refused).
//
// # Concurrent writers
//
// No bucket passes Cap: every statement that adds to an existing bucket
// is guarded by its room, and a new bucket holds at most Cap. N
// measurements of one window make at most ceil(N/Cap) + (writers - 1)
// buckets, as with Add, because a window holds at most one bucket with
// room per writer: a call opens a bucket in a window only after its
// top-ups filled every bucket of the window that had room when it read
// them (each took exactly the room it read, and a guard that holds means
// nobody took any), so a bucket of the window still with room was opened
// after that read, by a call in flight meanwhile; and each call leaves at
// most one bucket with room per window, the last it opens (Add's upserts
// open one only when no bucket has room). A top-up of a bucket that
// DeleteBefore removed meanwhile creates it again, holding its
// measurements. On FerretDB 1.x all this holds for one client with one
// connection only (see [patterns.FeatureConcurrentUpdates]).
//
// # Errors and retrying
//
// If the server refuses some measurements, AddMany returns a
// [*PartialError] listing them in Failed; every other one is stored
// once. A command that fails without saying which of its statements
// applied (a network error the driver could not retry, a timeout, a write
// concern error) ends the call with a [*PartialError] whose Unknown lists
// the measurements of its statements, and Failed those not sent yet; a
// read that fails after some measurements were stored ends it likewise,
// Failed listing those not yet written. Any other error means that
// nothing was written. Between statements, readers see the batch partly
// applied, each bucket consistent.
//
// After any error, calling AddMany again with the same points (the same
// series and measurements, in the same order, to the same database and
// collection: from any Buckets, through any client, of the same process)
// stores exactly the measurements that the failed call did not, each
// once, but for the two exceptions below. A call that fails after it wrote, or may have, leaves in the
// process a record of the measurements it stored and of its statements of
// unknown outcome, which the next call of the same points takes. It
// counts the first as stored without sending or reading anything for
// them: a bucket they went to may be gone since (DeleteBefore, a TTL
// index), and what the failed call is known to have stored, then was
// removed, stays removed. It reads which of the
// statements applied (one find of the buckets of their windows that hold
// their ids; a record meant for another server finds none there, and
// every measurement of unknown outcome is written), and sends the others
// again as they were before it stores the rest, so that each applies once
// even if its first send reaches the server late: a top-up's guard
// refuses a bucket that holds its id, and a new bucket goes again as an
// upsert of its _id (which the server refuses with a duplicate key when
// the first send lands while it runs: the retry then reads it again).
// The first exception: a statement of unknown outcome that did apply, and whose bucket was removed before the retry read it, cannot be
// told from one that did not (nothing of it is left to see), so it is
// sent again and its measurements are stored again. A caller that removes
// data (DeleteBefore) between a failed call and its retry, and must not
// see it back, drops the measurements of PartialError.Unknown instead of
// retrying them. A statement sent again that the server refuses
// (a statement timeout, a failover) proves only that this send did not
// apply: its measurements are listed in Unknown, not Failed, and the
// record goes on to the next retry. The second exception: a
// one-measurement upsert after two lost races that the server runs only
// after a retry has read stores its measurement again (once more for each
// such send: the first, or a retry's whose outcome was unknown too). The process keeps the records of the last 256
// failed calls, naming at most a million measurements in all; a retry
// after its record went, or from another process (after a crash), is not
// exact, but sending just the measurements of Failed again always is. Two
// calls of the same points at once are not a retry: both store them, as
// two Add calls do.
//
// The ids cost a bucket 17 bytes per AddMany statement that wrote to it,
// at most Cap of them; Add writes none.
func (b *Buckets[M, V]) AddMany(ctx context.Context, points []Point[M, V]) (err error) {
	ctx, op := b.start(ctx, "AddMany")
	defer op.Finish(&err)
	return pkg.Wrap("AddMany", b.addMany(ctx, points))
}

func (b *Buckets[M, V]) addMany(ctx context.Context, points []Point[M, V]) error {
	p, err := b.ready(ctx)
	if err != nil {
		return err
	}
	w, err := b.prepare(points)
	if err != nil {
		return err
	}
	return w.write(ctx, updatesPerCommand(p))
}

// prepare validates the measurements and groups them by series and
// window, each group in time order.
func (b *Buckets[M, V]) prepare(points []Point[M, V]) (*manyWrite, error) {
	w := &manyWrite{s: b.s, pts: make([]point, len(points)), state: make([]pointState, len(points)),
		groupOf: make([]int32, len(points)), byKey: map[windowKey]*group{}}
	nf := len(b.s.valueFields)
	values := make([]float64, len(points)*nf)
	enc := newEncoder(len(points) * b.zeroSize)
	metas := newMetaCache[M]()
	for i := range points {
		pt := &points[i]
		m, series, err := metas.value(pt.Meta)
		if err != nil {
			return nil, fmt.Errorf("point %d: %w", i, err)
		}
		raw, err := enc.add(&pt.Value)
		if err != nil {
			return nil, fmt.Errorf("point %d: %w", i, notADocument(pt.Value, err))
		}
		if w.pts[i], err = b.s.read(raw, values[i*nf:(i+1)*nf:(i+1)*nf]); err == nil {
			err = b.s.checkSize(m, &w.pts[i])
		}
		if err != nil {
			return nil, fmt.Errorf("point %d: %w", i, err)
		}
		key := windowKey{series: series, start: windowStart(w.pts[i].at, b.s.window)}
		g := w.byKey[key]
		if g == nil {
			g = &group{windowKey: key, meta: m, index: int32(len(w.groups))}
			w.byKey[key] = g
			w.groups = append(w.groups, g)
		}
		g.pending = append(g.pending, i)
		w.groupOf[i] = g.index
	}
	for _, g := range w.groups {
		slices.SortStableFunc(g.pending, func(a, b int) int { return cmp.Compare(w.pts[a].at, w.pts[b].at) })
	}
	return w, nil
}

// write stores the measurements of w, as the retry of an earlier call of
// the same measurements that failed, if there was one, and leaves a
// record for its own retry if it fails after it wrote, or may have.
func (w *manyWrite) write(ctx context.Context, limit int) error {
	// A call of the same points that failed before, in this process: this
	// is its retry (see "Errors and retrying" in [Buckets.AddMany]).
	var key string
	var earlier *record
	if failedCalls.active() {
		key = w.key()
		earlier = failedCalls.take(key)
	}
	err := w.run(ctx, limit, earlier)
	if err != nil && (w.stored || len(w.unsure) > 0) {
		if key == "" {
			key = w.key()
		}
		rec := &record{unknown: w.unsure}
		for at, st := range w.state {
			if st == stored {
				rec.stored = append(rec.stored, at)
			}
		}
		failedCalls.put(key, rec)
	}
	return err
}

// updatesPerCommand is how many update statements AddMany puts in one
// command on the path p: as many as the driver sends in one (0) where the
// server runs them as MongoDB does, else one (see
// [patterns.FeatureBatchedUpdates]).
func updatesPerCommand(p plan) int {
	if p.batchedUpdates {
		return 0
	}
	return 1
}

// metaCache remembers the encoded metas of a batch by their Go value,
// where the type is comparable: most measurements of a batch share a
// series with others.
type metaCache[M any] struct {
	known map[any]metaEntry // nil: M is not comparable
}

type metaEntry struct {
	v      bson.RawValue
	series string // bsonid.Key(v)
}

func newMetaCache[M any]() metaCache[M] {
	if t := reflect.TypeFor[M](); t.Comparable() && t.Kind() != reflect.Interface {
		return metaCache[M]{known: map[any]metaEntry{}}
	}
	return metaCache[M]{}
}

// value returns the meta's canonical form (see [metaValue]) and its
// series key.
func (c metaCache[M]) value(m M) (bson.RawValue, string, error) {
	if c.known != nil {
		if e, ok := c.known[m]; ok {
			return e.v, e.series, nil
		}
	}
	v, err := metaValue(m)
	if err != nil {
		return v, "", err
	}
	e := metaEntry{v: v, series: bsonid.Key(v)}
	if c.known != nil {
		c.known[m] = e
	}
	return e.v, e.series, nil
}

// manyWrite is one AddMany call: its measurements, grouped by series and
// window, and what became of them.
type manyWrite struct {
	s       *settings
	pts     []point
	state   []pointState
	groupOf []int32 // each measurement's group, an index in groups
	groups  []*group
	byKey   map[windowKey]*group
	// unsure are the statements whose outcome is unknown: this call's,
	// and those of an earlier call of the same measurements, which it
	// retries, sent again and refused. A retry of this call reads and
	// completes them.
	unsure []sentStatement
	stored bool  // some measurement was stored (by this call or the one it retries)
	failed []int // the measurements not stored, and not to be
	cause  error // why the first of them (the lowest index) failed
	first  int   // that index
	// doubt is why the first statement sent again by a retry was refused
	// (see [manyWrite.send]).
	doubt error
	// unknown are the measurements whose outcome is unknown: those of the
	// statements of a command that failed without saying which applied.
	unknown []int
}

// pointState is what became of a measurement of an AddMany call.
type pointState uint8

const (
	pending   pointState = iota // not stored yet
	stored                      // stored, once
	refused                     // not stored, and not to be by this call
	uncertain                   // its statement's outcome is unknown
)

// windowKey identifies the window of a series: the series by
// [bsonid.Key] of its meta, so that equal numbers of different types, at
// any depth of the meta, are one series, as they are to the server.
type windowKey struct {
	series string
	start  bson.DateTime
}

// group is the measurements of one series in one window.
type group struct {
	windowKey
	meta    bson.RawValue
	index   int32        // in manyWrite.groups
	pending []int        // the measurements not stored yet, in time order
	open    []openBucket // the buckets with room, as the round's read saw them
	// lost counts the rounds in which a top-up lost its room to another
	// writer, conflicts those in which another statement was refused
	// with a duplicate key.
	lost, conflicts int
}

// openBucket is a bucket with room, as a round read it.
type openBucket struct {
	id    bson.RawValue
	count int
}

// statement is one write of a round: measurements it stores in one
// bucket.
type statement struct {
	sentStatement
	g     *group
	model mongo.WriteModel
	// again: the statement is sent again by a retry, and its first send
	// may still apply.
	again bool
}

// sentStatement is what a retry needs to know of a statement: which
// measurements it stores, where, and its id, which it writes into the
// bucket's writes (see [Buckets.AddMany]).
type sentStatement struct {
	kind   int
	key    windowKey
	id     bson.ObjectID // the statement's; an insert's is its bucket's _id
	bucket bson.RawValue // the bucket a top-up tops up
	pts    []int
}

const (
	topUp    = iota // a guarded upsert into a bucket with room
	insert          // a new bucket
	single          // Add's upsert of one measurement
	reinsert        // a retry's upsert of a new bucket by its _id
)

// maxRounds is the most rounds a call runs: a group leaves the rounds
// once stored, or after maxLostRaces rounds losing a race and
// maxAttempts rounds with a duplicate key (see [Buckets.AddMany]).
const maxRounds = maxLostRaces + maxAttempts

// run writes the groups in rounds, limit update statements per command
// at most (0: no limit), until every measurement is stored or failed;
// first it completes the statements of earlier, the record of an
// earlier call of the same measurements, when there is one.
func (w *manyWrite) run(ctx context.Context, limit int, earlier *record) error {
	if earlier != nil {
		if err := w.resume(ctx, limit, earlier); err != nil {
			return w.abort(err)
		}
	}
	pending := slices.DeleteFunc(slices.Clone(w.groups), func(g *group) bool { return len(g.pending) == 0 })
	for round := 1; len(pending) > 0; round++ {
		if round > maxRounds {
			// Not reached: each round settles a group or counts a lost
			// race or a conflict against it.
			for _, g := range pending {
				w.fail(g.pending, errors.New("measurements left unwritten after the last round"))
			}
			break
		}
		if err := w.read(ctx, pending); err != nil {
			return w.abort(err)
		}
		var updates, inserts []statement
		for _, g := range pending {
			updates, inserts = w.plan(g, updates, inserts)
		}
		r := rounds{lost: map[*group]bool{}, conflicted: map[*group]error{}}
		if err := w.send(ctx, updates, limit, &r); err != nil {
			return w.abort(err)
		}
		// A group whose top-up lost its room opens no bucket in this
		// round: the next one reads again.
		inserts = slices.DeleteFunc(inserts, func(st statement) bool { return r.lost[st.g] })
		if err := w.send(ctx, inserts, 0, &r); err != nil {
			return w.abort(err)
		}
		w.settle(&r)
		pending = slices.DeleteFunc(pending, func(g *group) bool { return len(g.pending) == 0 })
	}
	if len(w.failed) > 0 || len(w.unknown) > 0 {
		slices.Sort(w.failed)
		slices.Sort(w.unknown)
		return &PartialError{Failed: w.failed, Unknown: w.unknown, Err: cmp.Or(w.cause, w.doubt)}
	}
	return nil
}

// settle counts the lost races and conflicts of a round against their
// groups, fails the measurements of a group after maxAttempts conflicts,
// and leaves in each group's pending the measurements still to store.
func (w *manyWrite) settle(r *rounds) {
	for g := range r.lost {
		g.lost++
	}
	for g, err := range r.conflicted {
		if g.conflicts++; g.conflicts == maxAttempts {
			w.fail(g.pending, conflict(g.conflicts, err))
		}
	}
	for _, g := range w.groups {
		g.pending = slices.DeleteFunc(g.pending, func(at int) bool { return w.state[at] != pending })
	}
}

// rounds is what the statements of one round met: the groups with a
// top-up that lost its room, and those with a statement refused with a
// duplicate key otherwise (with the error).
type rounds struct {
	lost       map[*group]bool
	conflicted map[*group]error
	// refused are the top-ups refused for lack of room, and the new
	// buckets a retry sent again refused with a duplicate key: where a
	// retry sent them, the first send of each may have applied.
	refused []sentStatement
}

// abort ends the call on err, which left the measurements not stored yet
// unwritten (and, when it is a write's, some of unknown outcome): err
// itself when nothing was stored and nothing may have been, else a
// [*PartialError] listing those not stored and those of unknown outcome,
// whose Err is err.
func (w *manyWrite) abort(err error) error {
	if !w.stored && len(w.unknown) == 0 {
		return err
	}
	for _, g := range w.groups {
		w.fail(g.pending, err)
	}
	slices.Sort(w.failed)
	slices.Sort(w.unknown)
	return &PartialError{Failed: w.failed, Unknown: w.unknown, Err: err}
}

// fail records that the measurements pts will not be stored by this
// call, and why (those of unknown outcome stay so).
func (w *manyWrite) fail(pts []int, err error) {
	for _, at := range pts {
		if w.state[at] != pending {
			continue
		}
		w.state[at] = refused
		w.failed = append(w.failed, at)
		if w.cause == nil || at < w.first {
			w.cause, w.first = err, at
		}
	}
}

// read reads the buckets with room of the windows of the groups that top
// up (not those storing one measurement per upsert): one find per
// maxSeriesPerRead series.
func (w *manyWrite) read(ctx context.Context, groups []*group) error {
	byKey := map[windowKey]*group{}
	var series []seriesWindows
	at := map[string]int{} // series -> index in series
	for _, g := range groups {
		g.open = g.open[:0]
		if g.lost >= maxLostRaces {
			continue
		}
		byKey[g.windowKey] = g
		i, ok := at[g.series]
		if !ok {
			i = len(series)
			at[g.series] = i
			series = append(series, seriesWindows{meta: g.meta})
		}
		series[i].starts = append(series[i].starts, g.start)
	}
	for chunk := range slices.Chunk(series, maxSeriesPerRead) {
		filter := w.s.openFilter(sameWindows(chunk))
		open := func(ctx context.Context) (*mongo.Cursor, error) {
			// The whole answer in the first batch: its documents are small.
			return w.s.coll.Find(ctx, filter, options.Find().
				SetProjection(w.s.openProjection()).SetBatchSize(readBatch))
		}
		for doc, err := range seq.Cursor[bson.Raw](ctx, open) {
			if err != nil {
				return srverr.Classify(err)
			}
			start, isDate := doc.Lookup(fieldStart).DateTimeOK()
			count, isNumber := number(doc.Lookup(fieldCount))
			g := byKey[windowKey{series: bsonid.Key(doc.Lookup(w.s.metaField)), start: bson.DateTime(start)}]
			if !isDate || !isNumber || g == nil {
				continue
			}
			g.open = append(g.open, openBucket{id: doc.Lookup("_id"), count: int(count)})
		}
	}
	return nil
}

// seriesWindows are the windows of one series that AddMany writes to.
type seriesWindows struct {
	meta   bson.RawValue
	starts []bson.DateTime
}

// sameWindows groups the series by their set of windows, in the order
// first seen: the read of the buckets with room asks for each set of
// series with its windows, exactly the pairs written to. A series whose
// meta is a document is a set of its own, read by equality: FerretDB 2.7
// compares numbers inside the documents of an $in by type where its
// equality compares them by value (int32 7 and 7.0), so an $in would miss
// the bucket with room of a series stored under a number of another type
// and open a second one.
func sameWindows(series []seriesWindows) []windows {
	var sets []windows
	at := map[string]int{} // the windows, as a key -> index in sets
	var key []byte
	for _, sw := range series {
		slices.Sort(sw.starts)
		key = key[:0]
		for _, s := range sw.starts {
			key = binary.LittleEndian.AppendUint64(key, uint64(s))
		}
		own := sw.meta.Type == bson.TypeEmbeddedDocument
		i, ok := at[string(key)]
		if !ok || own {
			i = len(sets)
			if !own {
				at[string(key)] = i
			}
			starts := make(bson.A, len(sw.starts))
			for j, s := range sw.starts {
				starts[j] = s
			}
			sets = append(sets, windows{starts: starts})
		}
		sets[i].metas = append(sets[i].metas, sw.meta)
	}
	return sets
}

// plan appends the statements that store g's pending measurements: the
// top-ups of the buckets read with room, in random order, and new buckets
// for the rest; or, after maxLostRaces lost races, one upsert per
// measurement.
func (w *manyWrite) plan(g *group, updates, inserts []statement) ([]statement, []statement) {
	if g.lost >= maxLostRaces {
		for _, at := range g.pending {
			updates = append(updates, w.statement(g, sentStatement{kind: single, key: g.windowKey, id: bson.NewObjectID(), pts: []int{at}}))
		}
		return updates, inserts
	}
	// In any order: concurrent writers that read the same buckets then
	// spread over them rather than all take the room of the same one.
	// (Without other writers a window has at most one bucket with room.)
	rand.Shuffle(len(g.open), func(i, j int) { g.open[i], g.open[j] = g.open[j], g.open[i] })
	rest := g.pending
	for _, o := range g.open {
		room := w.s.cap - o.count
		if len(rest) == 0 || room <= 0 {
			continue
		}
		k := min(room, len(rest))
		updates = append(updates, w.statement(g, sentStatement{kind: topUp, key: g.windowKey, id: bson.NewObjectID(), bucket: o.id, pts: slices.Clone(rest[:k])}))
		rest = rest[k:]
	}
	for len(rest) > 0 {
		k := min(w.s.cap, len(rest))
		inserts = append(inserts, w.statement(g, sentStatement{kind: insert, key: g.windowKey, id: bson.NewObjectID(), pts: slices.Clone(rest[:k])}))
		rest = rest[k:]
	}
	return updates, inserts
}

// statement builds the write of st, a statement of g: the same write for
// the same st, so that a retry sends again exactly what a failed call
// sent.
func (w *manyWrite) statement(g *group, st sentStatement) statement {
	s := w.s
	var model mongo.WriteModel
	switch st.kind {
	case single:
		p := &w.pts[st.pts[0]]
		sp := spanOf(p)
		model = mongo.NewUpdateOneModel().SetFilter(s.addFilter(g.meta, g.start)).SetUpdate(s.pushUpdate(p.raw, &sp, &st.id)).SetUpsert(true)
	case topUp:
		arr, sp := w.take(st.pts)
		model = mongo.NewUpdateOneModel().SetFilter(s.topUpFilter(st.bucket, g.meta, g.start, len(st.pts), st.id)).SetUpdate(s.pushUpdate(each(arr), &sp, &st.id)).SetUpsert(true)
	case insert:
		arr, sp := w.take(st.pts)
		model = mongo.NewInsertOneModel().SetDocument(s.newBucket(st.id, g.meta, g.start, arr, &sp))
	case reinsert:
		arr, sp := w.take(st.pts)
		filter, update, err := s.reinsertBucket(s.newBucket(st.id, g.meta, g.start, arr, &sp))
		if err != nil {
			panic(err) // newBucket encodes a valid document
		}
		model = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true)
	}
	return statement{sentStatement: st, g: g, model: model}
}

// take returns the documents of the measurements pts as a BSON array, and
// their span.
func (w *manyWrite) take(pts []int) (bson.RawValue, span) {
	nf := len(w.s.valueFields)
	stats := make([]float64, 3*nf)
	sp := span{n: int32(len(pts)), first: math.MaxInt64, last: math.MinInt64, min: stats[:nf], max: stats[nf : 2*nf], sum: stats[2*nf:]}
	for f := range nf {
		sp.min[f], sp.max[f] = math.Inf(1), math.Inf(-1)
	}
	size := 5
	for _, at := range pts {
		size += 2 + len(w.pts[at].raw) + 7 // type byte, index, NUL: room enough
	}
	arr := make([]byte, 4, size)
	var key []byte
	for i, at := range pts {
		p := &w.pts[at]
		key = strconv.AppendInt(key[:0], int64(i), 10)
		arr = append(arr, byte(bson.TypeEmbeddedDocument))
		arr = append(append(arr, key...), 0)
		arr = append(arr, p.raw...)
		sp.first, sp.last = min(sp.first, p.at), max(sp.last, p.at)
		for f, v := range p.values {
			sp.min[f], sp.max[f], sp.sum[f] = min(sp.min[f], v), max(sp.max[f], v), sp.sum[f]+v
		}
	}
	arr = append(arr, 0)
	binary.LittleEndian.PutUint32(arr, uint32(len(arr)))
	return bson.RawValue{Type: bson.TypeArray, Value: arr}, sp
}

// send sends the statements, at most limit per command (0: as many as
// the driver puts in one), and records what became of each: stored;
// refused for lack of room (a top-up that lost a race: r.lost and
// r.refused); a retry's new bucket refused with a duplicate key, its
// first send having landed during the upsert (r.refused: the retry reads
// which applied); refused with a duplicate key otherwise (r.conflicted:
// sent again in the next round, up to maxAttempts rounds); refused for
// good; or, when a command
// failed without saying which of its statements applied, unknown. A
// statement a retry sends again and the server refuses otherwise (a
// statement timeout, a failover) stays unknown, never failed: the refusal
// proves only that this send did not apply, and its first send may still
// reach the server; its record goes to the next retry, which reads again.
// It returns the error of that command.
func (w *manyWrite) send(ctx context.Context, stmts []statement, limit int, r *rounds) error {
	if len(stmts) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, len(stmts))
	for i, st := range stmts {
		models[i] = st.model
	}
	results, unknown := w.s.write(ctx, models, limit)
	for i, st := range stmts {
		switch err := results[i]; {
		case err == nil:
			w.settled(st.sentStatement, stored)
		case errors.Is(err, errUnknown):
			w.settled(st.sentStatement, uncertain)
		case errors.Is(err, errUnsent):
		case mongo.IsDuplicateKeyError(err) && st.kind == topUp:
			r.lost[st.g] = true
			r.refused = append(r.refused, st.sentStatement)
			patterns.OperationFrom(ctx).Lost()
		case mongo.IsDuplicateKeyError(err) && st.kind == reinsert:
			// Its upsert matched nothing, then met a bucket with its _id:
			// the first send, landing meanwhile. Not a conflict: the read
			// of r.refused finds it.
			r.refused = append(r.refused, st.sentStatement)
		case mongo.IsDuplicateKeyError(err):
			r.conflicted[st.g] = err
			if st.g.conflicts < maxAttempts-1 { // sent again next round (see [manyWrite.settle])
				patterns.OperationFrom(ctx).Retried(err)
			}
		case st.again:
			w.settled(st.sentStatement, uncertain)
			if w.doubt == nil {
				w.doubt = srverr.Classify(err)
			}
		default:
			w.fail(st.pts, srverr.Classify(err))
		}
	}
	return unknown
}

// settled records that st applied (state stored) or may have (uncertain).
func (w *manyWrite) settled(st sentStatement, state pointState) {
	if state == uncertain {
		w.unsure = append(w.unsure, st)
	}
	for _, at := range st.pts {
		w.state[at] = state
		if state == uncertain {
			w.unknown = append(w.unknown, at)
		}
	}
	if state == stored {
		w.stored = true
	}
}
