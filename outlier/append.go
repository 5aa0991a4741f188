package outlier

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxMisses is how many guarded writes in a row an Append lets concurrent
// writers win before it gives up with [patterns.ErrConflict]. Every miss
// means another writer made progress on the same parent.
const maxMisses = 100

// Append appends items to the parent, in order, after the items already
// there. Appending no items sends nothing.
//
// While the parent is open, items are pushed into its array under an
// atomic guard: the parent's flag is not true, its array exists, has room
// for the k items and holds none of them. Once the parent cannot take the
// next item (it holds Cap items, or the item would take it past 16 MiB),
// it is closed: the flag is set, and every later item goes to overflow
// documents, even if Remove makes room in the parent again (that keeps the
// append order). The close is guarded on the parent holding none of the
// items: one that another process pushed into the parent while it was
// open (after a Remove made room) is not stored again in overflow, and
// Append writes the others after it, into the parent while it has room.
// It is also guarded on the parent being as Append last read it: closed,
// if read closed; if read open, holding exactly as many items as read,
// with those the Append pushed since. When it matches nothing because the
// parent is open (a Remove made room in it, another process pushed into
// it, or it was deleted and inserted again), the items go into it while
// it has room, as they would for an Append that began then.
//
// Append's guards count the items of the parent's array by its size ($size)
// or by an element's index (Field.<i>); MongoDB also reads such a path as
// the field named i of any element, so an item with a field named by a
// number could make a guard on an index match nothing. None of them
// relies on that path alone: such an item may cost a push one miss (a
// read and a push more), never an item, a wrong close or an error.
// Every push leaves room in the parent for the write that
// closes it, so that a parent full in bytes can always be closed. Overflow
// documents are filled in seq order: items go to the newest document while
// it has room for them (Config.OverflowCap items and 16 MiB, both guarded
// in the filter of the write), then to a new one with the next seq,
// created by an upsert that the unique {parent, seq} index makes safe when
// two appenders race to create it (the loser retries). A writer never
// moves to a lower seq, so each caller's items come out in the order it
// appended them, and items appended after an Append returned come after
// its items.
//
// Retry-safe by item id: items whose id is already in the parent or its
// overflow documents are skipped, so calling Append again after a failure
// (a timeout, a lost connection) stores each item once. A failed Append
// has stored the first of its items (none, some or all), in order, and no
// others, and its error wraps the driver's. Ids are compared
// as the server compares them (7, int64(7) and 7.0 are one id). The ids
// must be distinct within a call. Every push is guarded on the ids of its
// items in the document it writes, so two Appends of one id that overlap
// (a retry racing the attempt it gave up on, which the server still runs)
// store it once in that document; they could store it in two documents
// only if one of them pushed into an older overflow document that
// [Repo.Remove] had given room again while the other pushed into a newer
// one. Each write is also sent again
// after a transient failure that applied nothing (FerretDB 2.x's
// deadlock): the pushes are guarded on the item ids and the room left,
// and the close is idempotent.
//
// Before anything is written it returns an error wrapping
// [patterns.ErrInvalid] for a bad parent id or item (an item that does not
// encode as a document, has no valid IDField field, or repeats an id) and
// for items that would overflow the parent when the unique index of
// [Repo.Indexes] is missing (checked once, with 1 listIndexes, by the
// first Append that overflows); and [patterns.ErrTooLarge] for an item
// that no document can hold: one whose encoded size, with its array
// element overhead, exceeds what an empty overflow document leaves of 16
// MiB after its fixed fields. A parent too full in bytes for an item is
// closed instead, so the item goes to overflow. Where the server refuses
// updates past 16 MiB ([patterns.FeatureUpdateSizeLimit]) the server
// checks the parent's size; elsewhere Append reads the parent and counts
// the exact size of each element, which misses only a concurrent write
// growing the parent's other fields between the read and the push. A
// parent written by other means with no room for the flag and tail hint
// cannot be closed: [patterns.ErrTooLarge]. A missing parent is
// [patterns.ErrNotFound]; a parent whose array is null or absent gets an
// empty one first: one command more, and, where the server checks the
// size, the read and the push after the push sent before any read, which
// misses on it (4 commands in all). A parent whose field holds something
// other than an array, or an array with an element that is not a document
// (written by other means: [Repo.Insert] refuses both), is
// [patterns.ErrInvalid] once Append reads it, naming the field or the
// element, and nothing is written. Where the server checks the size, the
// push sent before any read may still store the items after such an
// element (as into any array with room); if it misses, Append reads only
// the ids of the items, which do not show the element, and finds it once
// a push missed and the parent read after it is the parent read before
// it, by a read of the whole array (5 commands in all).
//
// Cost in commands where the server refuses updates past 16 MiB (MongoDB,
// FerretDB 2.x): an open parent, 1 (the guarded push). An overflowed
// parent, 4: the failed push, a read of the parent's flag, tail hint and
// item ids, a find of the newest overflow documents and of any holding
// the items (indexed), and the guarded push. An item that opens a new
// overflow document adds 1, the update of the parent's flag and tail hint
// (guarded as above: when it matches nothing, a read of the parent more,
// and if the parent is open, the items left go into it as after a push
// that missed) before the upsert that creates the document. On other servers (FerretDB
// 1.x), the parent is read whole first, to size the push: an open parent
// costs 2 and an overflowed one 3, and the repository's Appends and
// Updates of one parent take turns, since each push is guarded on the
// exact number of items read and would otherwise make the others miss. A
// push that matches nothing (another process appended first, or a
// retried Append finds its items there) costs a read and a push more;
// after 100 misses in a row Append gives up with [patterns.ErrConflict].
//
// Concurrent callers of one repository appending to one parent do not
// fight over it: the repository writes their Appends one batch at a time.
// An Append that arrives while another is being written waits (as long
// as ctx allows), and when that write ends, one of the waiting calls
// writes the items of all of them, in the order they arrived, as one
// Append of all the items would (an id two of them carry is stored once).
// N callers then cost about the commands of one Append of their items
// together, instead of each missing the others' guarded writes and
// reading again. If a batch fails, the call that wrote it returns the
// error and the others' items are written again by the next batch (the
// items already stored are skipped by id); a call whose ctx ends while it
// waits returns ctx's error, its items stored by a batch that had taken
// them, or not at all. An Append whose ctx carries a session
// ([mongo.NewSessionContext], as in a transaction) is written alone, in
// its session, never in a batch with other calls' items. Across
// repositories (processes) the guards alone keep the writers correct.
//
// What others see between the steps: each write is atomic, so a reader
// sees all or none of the items one command wrote, but may see some of a
// multi-item Append's writes and not the others. An Append of several
// items is a sequence of such writes: a [Repo.Delete] of the parent
// between two of them removes the items written before it, and if the
// parent is inserted again meanwhile, the Append writes the rest into the
// new parent (or its overflow) and returns nil, so that the new parent
// holds the Append's later items without its earlier ones, as after
// Appends of the earlier items before the Delete and of the later ones
// after the Insert. (An Append of one item is not split.) The flag (and the tail
// hint) are written before the overflow document they announce, so a
// reader may see the flag true while the overflow is still empty or lacks
// the items being written; it never sees an overflow item while the flag
// is false, and a merged read never misses an item whose Append returned
// before the read began. If Append fails between the two writes, the flag
// stays true with no overflow document until an Append succeeds: readers
// then send one find that returns nothing. A concurrent [Repo.Delete] may
// leave an overflow document behind; Delete again removes it. On FerretDB
// 1.x these promises about concurrent writers hold only for one client
// with one connection ([patterns.FeatureConcurrentUpdates]).
//
// A parent deleted and inserted again with the same id does not take the
// overflow documents a concurrent Delete left behind for its own: the
// Append that first overflows it finds them while the parent is still
// open, when no document can be its own (the flag is set before the
// first one is written), and deletes them before it closes the parent (a
// read of the parent and a deleteMany more). Only an Append of the
// deleted parent still running when the new one first overflows can
// write into the new parent's overflow after that; Delete the parent to
// be rid of it.
//
// Nor does an Append that read the deleted parent, still running when
// the new one is inserted, close the new one for its items: its close
// matches nothing on a new parent that is open, if it read the old one
// closed, or that holds another number of items than it counted in the
// old one (those read, with those it pushed since), if it read it open,
// and the items go into the new parent, after a read of it. It closes
// the new parent only if that one holds exactly as many items as it
// counted, none of them its items. For an Append that found the old
// parent full by count, that is a new parent full by count too (Cap
// items); for one that found the old parent full in bytes, a new parent
// of that many items, which may have room, by count and in bytes: the
// Append's items then go to overflow, after the new parent's items, in
// order and each once, and the new parent takes no more items.
func (r *Repo[P, I]) Append(ctx context.Context, parentID any, items ...I) (err error) {
	ctx, op := r.start(ctx, "Append")
	defer op.Finish(&err)
	if err := validParent("Append", parentID); err != nil {
		return err
	}
	return fail("Append", parentID, r.append(ctx, parentID, items))
}

func (r *Repo[P, I]) append(ctx context.Context, parentID any, items []I) error {
	id, err := encodeID(parentID) // valid: checked by Append
	if err != nil {
		return err
	}
	budget := overflowBudget(id)
	pending, err := r.encodeItems(items, budget)
	if err != nil || len(pending) == 0 {
		return err
	}
	p, err := r.plan(ctx)
	if err != nil {
		return err
	}
	if mongo.SessionFromContext(ctx) != nil {
		// Written alone, in the caller's session: another call's items
		// must not join its transaction.
		return r.appendItems(ctx, p, id, parentID, pending, budget)
	}
	return r.queued.do(ctx, bsonid.Key(id), pending, func(ctx context.Context, items []item) error {
		return r.appendItems(ctx, p, id, parentID, items, budget)
	})
}

// appendItems appends a batch of items (see appendQueues) to the parent;
// see Append.
func (r *Repo[P, I]) appendItems(ctx context.Context, p plan, id bson.RawValue, parentID any, pending []item, budget int) error {
	key, held, err := r.lockParent(ctx, p, id)
	if err != nil {
		return err
	}
	if held != nil {
		defer r.appending.unlock(key, held)
	}
	b := &appendRun{pending: pending}
	if p.serverSizeLimit && len(pending) <= r.cfg.Cap {
		switch out, err := r.pushParent(ctx, p, parentID, unread, pending); {
		case err != nil:
			return err
		case out == refused:
			b.one = true
		case out == pushed:
			return nil
		default:
			b.missed = true
		}
	}
	// last: the items of the read before, once a write missed (see
	// checkElements); read: there was one.
	var last []bson.RawValue
	read := false
	for b.misses < maxMisses {
		st, err := r.readParent(ctx, p, parentID)
		if err != nil {
			return err
		}
		if p.serverSizeLimit && b.missed {
			if read && st.open && !st.noArray && sameValues(last, st.items) {
				if err := r.checkElements(ctx, parentID); err != nil {
					return err
				}
			}
			last, read = st.items, true
		}
		// The ids of the items in the parent matter only where the guard
		// on them may have made a push miss, and before items go to
		// overflow, where nothing guards on the parent's ids: reading them
		// costs a key per item, so the common push skips it.
		if b.missed || b.one || !st.open || r.fitParent(st, b.pending) < len(b.pending) {
			if b.pending = without(b.pending, r.present(st)); len(b.pending) == 0 {
				return nil
			}
		}
		if st.open && st.noArray {
			if st.size > patterns.MaxDocumentSize {
				return errs.TooLarge("the parent is %d bytes once its %s is an empty array", st.size, r.cfg.Field)
			}
			created, err := r.newArray(ctx, parentID)
			if err != nil {
				return err
			}
			if !created {
				b.misses++ // a concurrent Append gave it one first: read again
				continue
			}
			st.noArray = false // the parent as read, with an empty array
		}
		// over: the items that go to overflow documents, if any; held:
		// what the close is guarded on (see appendOverflow), the items the
		// parent holds as far as Append knows (those read and those it
		// pushed since), or readClosed.
		over, held := b.pending, readClosed
		if st.open {
			var done bool
			if over, held, done, err = r.intoOpen(ctx, p, parentID, st, b); err != nil || done {
				return err
			}
		}
		if over != nil {
			rest, err := r.appendOverflow(ctx, p, parentID, held, st.tail, over, budget)
			if err != nil || len(rest) == 0 {
				return err
			}
			// The parent took some of them meanwhile (another process
			// made room and appended them), or is open again (deleted and
			// inserted again): the rest go into it, after them.
			b.pending, b.misses, b.missed = rest, b.misses+1, true
		}
	}
	return lost("the parent")
}

// appendRun is what appendItems knows between its reads of the parent.
type appendRun struct {
	pending []item // the items not stored yet, as far as it knows
	// one: the server refused a push as too large, so push one item at a
	// time to find how many the parent still takes.
	one bool
	// missed: a push matched nothing, maybe because the parent holds some
	// of the items already (a retried Append): drop those first.
	missed bool
	misses int // guarded writes in a row that matched nothing
}

// intoOpen writes b's items into the parent, read open (st), while it
// takes them: it pushes as many as fit, or, once the parent cannot take
// the next item, returns the items that go to overflow (over, which
// closes the parent) with held, the items the parent holds as far as
// Append knows (those read and those it pushed). done: every item is
// stored. Neither: read the parent again (a push missed, or was refused,
// or took some of the items one at a time).
func (r *Repo[P, I]) intoOpen(ctx context.Context, p plan, parentID any, st parentState, b *appendRun) (over []item, held int, done bool, err error) {
	k := r.fitParent(st, b.pending)
	if b.one {
		k = min(k, 1)
	}
	held = len(st.items)
	if k < len(b.pending) {
		// Some items go to overflow: check, before writing any, that
		// Append can overflow.
		if err := r.checkIndexed(ctx); err != nil {
			return nil, 0, false, err
		}
	}
	if k == 0 {
		if st.size > patterns.MaxDocumentSize {
			// A parent written by other means, too full for the fields the
			// close writes: on MongoDB the server would refuse it.
			return nil, 0, false, errs.TooLarge("the parent is %d bytes once its %s and %s are written, so it cannot be marked overflowed",
				st.size, r.cfg.FlagField, r.cfg.TailField)
		}
		return b.pending, held, false, nil // closes the parent
	}
	out, err := r.pushParent(ctx, p, parentID, held, b.pending[:k])
	switch {
	case err != nil:
		return nil, 0, false, err
	case out == refused && k == 1:
		return b.pending, held, false, nil
	case out == refused:
		b.one = true
	case out == pushed && k == len(b.pending):
		return nil, 0, true, nil
	case out == pushed && !b.one:
		// The parent took all it could: it is full for the next item.
		b.misses = 0
		return b.pending[k:], held + k, false, nil
	case out == pushed:
		b.pending, b.misses = b.pending[k:], 0
	default:
		patterns.OperationFrom(ctx).Lost()
		b.misses, b.missed = b.misses+1, true
	}
	return nil, held, false, nil
}

// lost is the error of an Append that lost too many races.
func lost(where string) error {
	return fmt.Errorf("%d writes to %s in a row lost to concurrent writers: %w", maxMisses, where, patterns.ErrConflict)
}

// parentState is what Append knows of a parent from a read.
type parentState struct {
	open bool  // the flag is not true: items may still go into the parent
	tail int64 // the tail hint, 0 when absent
	// size is the parent's encoded size once its flag is a bool and its
	// tail hint an int64, as every push and the close make them (so that
	// the close, which changes their values, never grows it); -1 when not
	// read (the server checks it).
	size  int
	items []bson.RawValue // the items in the array, as many as it holds (as read: with the server's size limit, their ids only)
	// noArray: the array field is null or absent (with the server's size
	// limit, where the ids are read, it may also hold a value of another
	// type, which newArray reports), so nothing can be pushed to it before
	// newArray gives it one.
	noArray bool
}

// readParent reads the state of the parent (see [Repo.stateProjection]).
func (r *Repo[P, I]) readParent(ctx context.Context, p plan, parentID any) (parentState, error) {
	raw, err := r.findParent(ctx, parentID, r.stateProjection(p))
	if err != nil {
		return parentState{}, err
	}
	return r.stateOf(p, raw)
}

// stateOf reads the state of a parent read with [Repo.stateProjection].
func (r *Repo[P, I]) stateOf(p plan, raw bson.Raw) (parentState, error) {
	st := parentState{open: !r.flagged(raw), size: -1}
	if !p.serverSizeLimit {
		st.size = len(raw) + growth(raw, r.cfg.FlagField, 1) + growth(raw, r.cfg.TailField, 8)
	}
	if t, ok := raw.Lookup(r.cfg.TailField).AsInt64OK(); ok && t > 0 {
		st.tail = t
	}
	if v, err := raw.LookupErr(r.cfg.Field); err != nil || v.Type == bson.TypeNull {
		st.noArray = true
		if st.size >= 0 {
			st.size += growth(raw, r.cfg.Field, 5) // an empty array
		}
		return st, nil
	}
	arr, err := r.array(raw)
	if err != nil {
		return parentState{}, err
	}
	vals, err := arr.Values()
	if err != nil {
		return parentState{}, err
	}
	if err := r.documents(vals); err != nil {
		return parentState{}, err
	}
	st.items = vals
	return st, nil
}

// documents returns an error wrapping [patterns.ErrInvalid] naming the
// first of the parent's elements, vals, that is not a document: written by
// other means ([Repo.Insert] refuses it), it is no item, the reads cannot
// decode it, and where Append reads the ids only it does not see it (see
// [Repo.checkElements]).
func (r *Repo[P, I]) documents(vals []bson.RawValue) error {
	for i, v := range vals {
		if v.Type != bson.TypeEmbeddedDocument {
			return r.notDocument(i, v)
		}
	}
	return nil
}

// notDocument is the error of element i of the array, v, that is not a
// document.
func (r *Repo[P, I]) notDocument(i int, v bson.RawValue) error {
	return errs.Invalid("%s.%d is a BSON %s, not a document", r.cfg.Field, i, v.Type)
}

// checkElements reads the parent's array whole and checks that its
// elements are documents (see [Repo.documents]). Where the server checks
// the size, Append reads the ids of the items only ({Field.<IDField>: 1}),
// a projection that drops the elements that are not documents (MongoDB:
// SERVER-6527; FerretDB does the same), so it counts fewer items than
// the guards' $size and index paths see, and its writes would miss until
// it gave up. Append reads the array only when a write missed and the
// parent read after it is the parent read before it: no write that Append
// can see made it miss.
func (r *Repo[P, I]) checkElements(ctx context.Context, parentID any) error {
	raw, err := r.findParent(ctx, parentID, r.arrayProjection())
	if err != nil {
		return err
	}
	arr, err := r.array(raw)
	if err != nil {
		return err
	}
	vals, err := arr.Values()
	if err != nil {
		return err
	}
	return r.documents(vals)
}

// sameValues reports whether a and b hold the same values, byte for byte.
func sameValues(a, b []bson.RawValue) bool {
	return slices.EqualFunc(a, b, func(x, y bson.RawValue) bool {
		return x.Type == y.Type && bytes.Equal(x.Value, y.Value)
	})
}

// present returns the keys (see [bsonid.Key]) of the ids of the items in
// the parent.
func (r *Repo[P, I]) present(st parentState) map[string]bool {
	ids := make(map[string]bool, len(st.items))
	for _, v := range st.items {
		if doc, ok := v.DocumentOK(); ok {
			if id, err := doc.LookupErr(r.cfg.IDField); err == nil {
				ids[bsonid.Key(id)] = true
			}
		}
	}
	return ids
}

// newArray gives the parent an empty array where its array field is null
// or absent, and reports whether it did. If that matches nothing, the
// field holds a value that is not an array (an error wrapping
// [patterns.ErrInvalid]) or a concurrent Append gave it one first (false).
func (r *Repo[P, I]) newArray(ctx context.Context, parentID any) (bool, error) {
	res, err := updateOne(ctx, r.parents, r.newArrayFilter(parentID), r.newArrayUpdate())
	if err != nil || res.MatchedCount == 1 {
		return err == nil, err
	}
	raw, err := r.findParent(ctx, parentID, r.arrayProjection())
	if err != nil {
		return false, err
	}
	_, err = r.array(raw)
	return false, err
}

// growth is how many bytes setting the field key of doc to a value of n
// bytes adds to it (negative: removes).
func growth(doc bson.Raw, key string, n int) int {
	v, err := doc.LookupErr(key)
	if err != nil {
		return 1 + len(key) + 1 + n // type, name, NUL, value
	}
	return n - len(v.Value)
}

// flagged reports whether the parent's flag is true.
func (r *Repo[P, I]) flagged(parent bson.Raw) bool {
	b, ok := parent.Lookup(r.cfg.FlagField).BooleanOK()
	return ok && b
}

// array returns the parent's array of embedded items (empty when absent)
// or an error wrapping [patterns.ErrInvalid] when the field holds
// something else.
func (r *Repo[P, I]) array(parent bson.Raw) (bson.RawArray, error) {
	v, err := parent.LookupErr(r.cfg.Field)
	if err != nil || v.Type == bson.TypeNull {
		return bson.RawArray{5, 0, 0, 0, 0}, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errs.Invalid("field %q of the parent holds a BSON %s, not an array", r.cfg.Field, v.Type)
	}
	return arr, nil
}

// fitParent returns how many of the leading items fit in the parent: by
// count, and by size when the size is known (elementSize is exact, so the
// estimate is exact for the parent as read).
func (r *Repo[P, I]) fitParent(st parentState, items []item) int {
	size, n := st.size, len(st.items)
	k := 0
	for ; k < len(items) && n+k < r.cfg.Cap; k++ {
		if size >= 0 {
			size += elementSize(n+k, len(items[k].raw))
			if size > patterns.MaxDocumentSize {
				break
			}
		}
	}
	return k
}

// outcome is what became of a guarded push.
type outcome int

const (
	missed  outcome = iota // the guard matched nothing: nothing was written
	pushed                 // the items were written
	refused                // the server refused it: the document would pass 16 MiB
)

// pushParent pushes items into the parent if it is open, has room for
// them (see [Repo.pushParentCommand]; n is the number of items read, for
// the plan that guards on it) and holds none of them. It retries FerretDB 2.x's transient deadlock
// (srverr.Retry): the failed attempt applied nothing, and the guard on the
// item ids makes the push idempotent.
func (r *Repo[P, I]) pushParent(ctx context.Context, p plan, parentID any, n int, items []item) (outcome, error) {
	filter, update := r.pushParentCommand(p, parentID, n, items)
	return outcomeOf(updateOne(ctx, r.parents, filter, update))
}

// outcomeOf reads the result of a guarded push. A refusal because the
// document would pass 16 MiB is an outcome, not an error, on every server
// (see srverr.TooLarge): Append then closes the parent.
func outcomeOf(res *mongo.UpdateResult, err error) (outcome, error) {
	switch {
	case srverr.TooLarge(err):
		return refused, nil
	case err != nil:
		return missed, err
	case res.MatchedCount+res.UpsertedCount == 1:
		return pushed, nil
	}
	return missed, nil
}

// readClosed is the held of [Repo.appendOverflow] (and of
// [Repo.closeFilter]) for a parent that Append read closed.
const readClosed = -1

// tailDoc is what Append knows of the newest overflow document. Its
// numbers are lower bounds once others may have written: the guards of the
// writes check the real ones.
type tailDoc struct {
	ID    bson.RawValue `bson:"_id"`
	Seq   int64         `bson:"seq"`
	Count int           `bson:"count"`
	Bytes int           `bson:"bytes"`
	Items []bson.Raw    `bson:"items"` // projected to their ids
}

// appendOverflow appends items to the parent's overflow documents, from
// seq `from` (the parent's tail hint) onwards; see Append. held is what
// Append last read of the parent: readClosed, or, read open, how many
// items it holds (with those Append pushed since), so that others may
// push into it until it is closed. Before it writes a new overflow
// document, appendOverflow closes the parent, guarded (see
// [Repo.closeFilter]) on the parent holding none of the items and still
// being the parent read: closed if read closed, holding at least held
// items if read open. If that matches nothing because the parent is open
// (it took some of the items meanwhile, another process removed items
// from it, or it was deleted and inserted again), it returns the items
// it does not hold (rest), which go back to the parent.
func (r *Repo[P, I]) appendOverflow(ctx context.Context, p plan, parentID any, held int, from int64, items []item, budget int) (rest []item, err error) {
	if err := r.checkIndexed(ctx); err != nil {
		return nil, err
	}
	var tail *tailDoc // the newest document; nil: none from `from` on
	query := true     // tail is unknown: find it
	for misses := 0; misses < maxMisses; {
		if query {
			t, left, found, err := r.findTail(ctx, parentID, from, items)
			if err != nil {
				return nil, err
			}
			if held != readClosed && len(found) > 0 {
				// The parent was read open, when it had no overflow
				// document (the flag is set before the first is written):
				// another appender has closed it since, or these are left
				// over from a deleted parent with the same id (see
				// Delete), which this parent must not take for its own.
				st, err := r.readParent(ctx, p, parentID)
				if err != nil {
					return nil, err
				}
				if st.open {
					// Still open, so no document is this parent's: each
					// found was there before the read that shows it open.
					// (If it holds another number than held items now, the
					// close misses and the items go back to the parent.)
					// Once they are gone, what the find saw of this
					// parent's overflow is nothing: no need to find again
					// (a document another appender writes after the read
					// is met by the guarded writes, as after any find).
					if err := r.dropLeftovers(ctx, parentID, found); err != nil {
						return nil, err
					}
					tail, query = nil, false
				} else {
					// Closed by another appender: what the parent holds
					// now, it held before the flag was set.
					items, held, from = without(items, r.present(st)), readClosed, st.tail
				}
				misses++
				continue
			}
			if tail, items = t, left; len(items) == 0 {
				return nil, nil
			}
			query = false
		}
		if tail != nil {
			from = tail.Seq
			if k, size := r.fitOverflow(tail, items, budget); k > 0 {
				ok, err := r.pushOverflow(ctx, parentID, tail.Seq, items[:k], size, budget, false)
				if err != nil {
					return nil, err
				}
				if !ok {
					patterns.OperationFrom(ctx).Lost()
					misses, query = misses+1, true
					continue
				}
				tail.Count += k
				tail.Bytes += size
				if items, misses = items[k:], 0; len(items) == 0 {
					return nil, nil
				}
				continue
			}
			from = tail.Seq + 1
		}
		// Open the document seq `from`: announce it on the parent first,
		// unless the parent holds one of the items (pushed into it, while
		// it was open, by another process) or is not the parent read (see
		// closeFilter).
		res, err := updateOne(ctx, r.parents, r.closeFilter(parentID, held, items), r.closeUpdate(from))
		if err != nil {
			return nil, err
		}
		if res.MatchedCount == 0 {
			patterns.OperationFrom(ctx).Lost()
			st, err := r.readParent(ctx, p, parentID) // errNoParent if it is gone
			if err != nil {
				return nil, err
			}
			if items = without(items, r.present(st)); len(items) == 0 {
				return nil, nil
			}
			if st.open {
				return items, nil
			}
			misses, query, held = misses+1, true, readClosed
			continue
		}
		held = readClosed
		k, size := r.fitOverflow(&tailDoc{}, items, budget) // >= 1: encodeItems checked it
		ok, err := r.pushOverflow(ctx, parentID, from, items[:k], size, budget, true)
		if err != nil {
			return nil, err
		}
		if !ok {
			patterns.OperationFrom(ctx).Lost()
			misses, query = misses+1, true
			continue
		}
		tail = &tailDoc{Seq: from, Count: k, Bytes: size}
		if items, misses = items[k:], 0; len(items) == 0 {
			return nil, nil
		}
	}
	return nil, lost("the overflow documents")
}

// dropLeftovers deletes the overflow documents found (by _id) of a parent
// that was read open after they were found: documents a deleted parent
// with the same id left behind.
func (r *Repo[P, I]) dropLeftovers(ctx context.Context, parentID any, found []bson.RawValue) error {
	op := patterns.OperationFrom(ctx)
	return srverr.Retry(ctx, func() error {
		op.Sent(1)
		res, err := r.overflow.DeleteMany(ctx, leftoversFilter(parentID, found))
		if err == nil {
			op.Affected(res.DeletedCount)
		}
		return err
	})
}

// findTail finds the newest overflow document of the parent from seq
// `from` on (nil if there is none) and drops the items already stored in
// any overflow document; found are the _ids of the documents it read.
func (r *Repo[P, I]) findTail(ctx context.Context, parentID any, from int64, items []item) (tail *tailDoc, left []item, found []bson.RawValue, err error) {
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := r.overflow.Find(ctx, r.overflowQuery(parentID, from, items),
		options.Find().SetProjection(r.overflowQueryProjection()))
	if err != nil {
		return nil, nil, nil, err
	}
	var docs []tailDoc
	if err := obs.All(ctx, op, cur, &docs); err != nil {
		return nil, nil, nil, err
	}
	present := map[string]bool{}
	for i := range docs {
		doc := &docs[i]
		found = append(found, doc.ID)
		for _, it := range doc.Items {
			if id, err := it.LookupErr(r.cfg.IDField); err == nil {
				present[bsonid.Key(id)] = true
			}
		}
		if doc.Seq >= from && (tail == nil || doc.Seq > tail.Seq) {
			tail = doc
		}
	}
	return tail, without(items, present), found, nil
}

// fitOverflow returns how many of the leading items fit in the document
// after the tail's items, and their size with element overhead (counted
// for the largest index, OverflowCap-1, so that it is an upper bound).
func (r *Repo[P, I]) fitOverflow(tail *tailDoc, items []item, budget int) (k, size int) {
	for ; k < len(items) && tail.Count+k < r.cfg.OverflowCap; k++ {
		s := elementSize(r.cfg.OverflowCap-1, len(items[k].raw))
		if tail.Bytes+size+s > budget {
			break
		}
		size += s
	}
	return k, size
}

// pushOverflow pushes items (size bytes) into the overflow document seq if
// it has room and holds none of them, creating it when upsert is set. It
// reports whether it did: false when the document lacked room or held one
// of the items (or, with upsert, when another writer created it first and
// the guard fails there: the unique index refuses the second document).
func (r *Repo[P, I]) pushOverflow(ctx context.Context, parentID any, seq int64, items []item, size, budget int, upsert bool) (bool, error) {
	res, err := updateOne(ctx, r.overflow,
		r.pushOverflowFilter(parentID, seq, items, size, budget),
		pushOverflowUpdate(items, size),
		options.UpdateOne().SetUpsert(upsert))
	switch {
	case upsert && mongo.IsDuplicateKeyError(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return res.MatchedCount+res.UpsertedCount == 1, nil
}
