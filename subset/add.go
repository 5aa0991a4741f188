package subset

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxAttempts bounds, as a safeguard, the compare-and-sets of a
// recomputation (whose bound is two or three: see recompute); past it the
// operation returns patterns.ErrConflict.
const maxAttempts = 10

// Add stores items under the parent: first in the items collection, then
// in the parent's subset, which afterwards holds the Cap most relevant of
// all the parent's items, whatever the order in which they arrive. Adding
// no items sends nothing.
//
// Push path (MongoDB 5.2+, FerretDB 2.x): four commands. A read of the
// parent's revision alone (that it exists, and which incarnation it is:
// see below); an unordered insertMany; one updateOne on the parent that
// pushes the items with $each, $sort (the configured order) and $slice
// (Cap), and sets the push field (Config.PushedField) to a new ObjectID,
// which leaves the revision alone, so that pushes make a recomputation
// start again once at most (see the package documentation); and a count
// of the items pushed (served by the index of [Repo.Indexes]). The update
// is guarded by {Field.IDField: {$nin: ids}}, so that it never pushes an
// item the subset already holds, by the revision of the incarnation
// read (see below), and by the push field not being true: a
// recomputation that a push made start again announces itself so, and
// then the push matches nothing and Add recomputes in place of the count
// (a read of the parent, a find and a compare-and-set: two commands more,
// as below). The count, of the items stored exactly as pushed,
// finds an item that a concurrent [Repo.Remove] deleted, or a concurrent
// [Repo.Update] (or Remove and Add) replaced with another version, between
// the insert and the push, which the push put in the subset nonetheless:
// Add then recomputes the subset (three commands more), so that it keeps
// no item, or version of an item, that is not stored.
// A subset field that $push cannot extend (null, say: a nil slice stored
// without omitempty) is replaced by a recomputation in place of the
// count: six commands in all. More than 100 items, or items whose
// documents and ids take more than 16 MiB ([patterns.MaxDocumentSize],
// more than one update can carry), are put in the subset by a
// recomputation (a read of the parent and the two commands of the
// portable path's recomputation) in place of the push and its count.
//
// On either path, the first Add to a parent that no Add or recomputation
// has written since its creation (it has no stamped revision) stamps it
// after the read (one command more, once per parent; see the package
// documentation), before storing anything: two more when another call
// stamps it first, between the read and the stamp (the stamp that matches
// nothing, and a read again).
//
// Portable path (other servers, FerretDB 1.x among them, and every server
// when Config.CountField is set): four commands (five with a count field,
// which the recomputation sets from one count of the items). A
// read of the parent's revision, the insertMany, and the recomputation of
// the subset from the items collection (an indexed find of the first Cap
// items and a compare-and-set of the subset on the revision; see the
// package documentation). The subset never holds more than Cap items, not
// even for a moment.
//
// Between the two steps a reader sees the items in the items collection
// ([Repo.All], [Repo.Page]) but not yet in the subset ([Repo.Get]).
//
// Retry-safe: after a failure at any step, calling Add again with the same
// items leaves exactly one copy of each in each place. Its writes are
// retried a few times after a transient failure (FerretDB 2.x's
// "deadlock detected", which applied nothing): of the insertMany, only
// the items whose insert failed so. Items past 32 MiB or 10,000 items
// are inserted with one insertMany per 32 MiB or 10,000 items (one
// command more each), and the reads and deletes that name their ids
// (below) are sent per 8 MiB or 10,000 ids. An item whose id is
// already stored under the parent counts as added by the earlier attempt
// and keeps its stored version (Add is not an upsert: use [Repo.Update]
// to change an item). An item that the insert finds stored but that
// the parent no longer holds when Add reads it back (a concurrent
// [Repo.Remove] deleted it in between) is inserted again: that Add
// comes after the Remove (two commands more). Should the insert find it
// taken again, and the read miss it again, Add reads whether an item of
// another parent holds the id (one command more: then the id is bad
// input, below) before it inserts it again; after 10 such inserts, each
// finding the item stored and the read finding it removed, Add deletes
// the items it inserted and returns [patterns.ErrConflict]: Add again.
// (A unique index of the application's on the items collection, other
// than those of [Repo.Indexes], that an item's value collides with gives
// that ErrConflict too, at every attempt: the insert finds a key taken
// that no item with the item's id holds.)
// The find of ids held elsewhere goes to every shard when the items
// collection is sharded. If the guarded push matches
// nothing because the subset holds some of the items already (an earlier
// attempt, or a concurrent recomputation, put them there), Add recomputes
// the subset (a read of the parent, then a recomputation: three commands
// more, at most two compare-and-sets and one more after a push that left
// the subset full, see the package documentation)
// rather than push only the absent items: a recomputation in flight
// that read the items collection before Add's insert, a concurrent Remove
// of one of the items say, could otherwise drop the items the subset held
// when its compare-and-set lands, leaving an item stored and out of the
// subset for good (issue 34). A recomputation moves the revision, so
// that such a compare-and-set matches nothing and reads again.
//
// A missing parent gives [patterns.ErrNotFound] and leaves no item behind
// (a parent missing at the read, or at the stamp that follows it, before
// anything is stored): both paths read the parent (and stamp it) before
// inserting, so that an Add that returns nil found its parent before its
// items were stored, and takes effect then (an Add that started before the parent was created
// could otherwise insert its items as orphans, see them deleted as such
// by another call, and push into the parent created meanwhile). Its
// writes to the parent are bound to the incarnation it read, its stamped
// revision: a parent deleted and created again after the read is not the
// one Add found, and Add never writes into it what it stored for the
// deleted one. A parent deleted concurrently, after that read (and
// perhaps created again), is found by a later step (the push that matches
// nothing, the compare-and-set of a recomputation, the read that follows
// them): the Add took effect before the deletion (another call may have read,
// replaced or removed its items by then), so it returns nil, after
// deleting the items it inserted, which go with the parent (a reader may
// see them until then); see [Repo.Delete]. Should that deletion fail
// (the connection broke), Add returns that failure, since the items may
// remain: Add again deletes them, and reports ErrNotFound. The deletion
// matches the parent's items with the ids of Add's, and, when it deleted
// some, Add reads the parent again (one command more): if the
// application created the parent again meanwhile, another call may have
// stored items with those ids under it, which the deletion cannot tell
// from this Add's; so Add runs again on that parent, and returns once its
// items are stored there and in its subset, taking effect after the
// creation. So when a parent is deleted and created again during an Add
// (or deleted before it and created during it: its read finds no parent,
// and the deletion of what an earlier attempt may have left meets the new
// parent's items), and another call stores an item with the same id under the new parent
// meanwhile, that item may be deleted and stored again as this Add has it:
// a version another call stored (another Add's, an [Repo.Update]'s) may be
// replaced by this Add's, one of its items that another call removed
// from the new parent meanwhile (a Remove that returned nil) may be
// stored again, and between the deletion and the new insert a
// reader misses the item, an Update or a Remove of it reports
// [patterns.ErrNotFound], and another Add of it stores its own version,
// which this Add's insert then finds and keeps (Add is not an upsert):
// so that other Add may replace the version an Update stored. If the read that follows the deletion fails,
// Add returns that failure with the items deleted: Add again stores them
// on the new parent; if that parent is deleted again before the new run
// finds it, Add returns nil (it took effect before the first deletion). A
// parent deleted and created again under each of 10 such runs gives
// [patterns.ErrConflict]: Add again.
//
// A parent that the items would take past [patterns.MaxDocumentSize]
// (because of its own fields: each item is limited so that Cap of them
// fit) gives [patterns.ErrTooLarge]: the server refuses the update (on a
// server without [patterns.FeatureUpdateSizeLimit] the repository
// measures the parent before writing it), and Add deletes the items it
// stored, after one more read of the parent, so that no later
// recomputation meets them; should that fail, Add returns the failure,
// not ErrTooLarge, and Add again deletes them.
//
// Bad input gives [patterns.ErrInvalid] and writes nothing: an invalid
// parent id, an item without a valid id or a scalar sort value, an item
// whose ParentField names another parent, two items with one id, an id
// stored under another parent (but for the stamp of a new parent, which
// that Add sends before the insert that finds the id taken). An item too
// large for the cap (see [Config].Cap) gives [patterns.ErrTooLarge] and
// writes nothing. An id
// stored under another parent is found only by the insert, after which
// Add deletes the items it inserted; so after a failed Add, an Add again
// that reports ErrInvalid for that reason may leave the items the failed
// attempt stored, in the items collection and not in the subset (Add
// cannot tell them from items added before): send them again without the
// bad ones, or Remove them. Should the deletion fail, Add returns that
// failure, not ErrInvalid.
func (r *Repo[P, I]) Add(ctx context.Context, parentID any, items ...I) (err error) {
	ctx, op := r.start(ctx, "Add")
	defer op.Finish(&err)
	parent, err := newParentRef(r.cfg.ParentField, parentID)
	if err != nil {
		return fail("Add", err)
	}
	if len(items) == 0 {
		return nil
	}
	entries, err := r.encodeAll(items, parent)
	if err != nil {
		return fail("Add", fmt.Errorf("%s: %w", parent, err))
	}
	p, err := r.plan(ctx)
	if err != nil {
		return fail("Add", err)
	}
	attempt := 1
	for ; ; attempt++ {
		if p.push && r.cfg.CountField == "" {
			err = r.addPush(ctx, p, parent, entries)
		} else {
			err = r.addPortable(ctx, p, parent, entries)
		}
		if err == nil {
			return nil
		}
		err = r.takeBack(ctx, p, parent, entries, err)
		if !errors.Is(err, errParentBack) {
			break
		}
		if attempt == maxAttempts {
			err = fmt.Errorf("the parent was deleted and created again under %d attempts: %w", attempt, patterns.ErrConflict)
			break
		}
	}
	// Its items went with the parent; or it ran again on a parent
	// created again, which was deleted again: it took effect before the
	// first deletion, its items deleted since.
	if errors.Is(err, errParentGone) || attempt > 1 && errors.Is(err, patterns.ErrNotFound) {
		return nil
	}
	return fail("Add", fmt.Errorf("%s: %w", parent, err))
}

// errParentGone is what a step of Add that found no parent returns,
// after Add's read had found it: the parent was deleted meanwhile, and
// Add took effect before the deletion (its items may have been read,
// replaced or removed by then), so it returns nil once its items are
// deleted with the parent (takeBack).
var errParentGone = errors.New("the parent was deleted after Add found it")

// gone returns errParentGone for the patterns.ErrNotFound or the
// errRecreated of a step of Add after its read of the parent, and any
// other err as it is.
func gone(err error) error {
	if errors.Is(err, patterns.ErrNotFound) || errors.Is(err, errRecreated) {
		return errParentGone
	}
	return err
}

// errParentBack is what takeBack returns when, after Add found its
// parent missing, it deleted items of the parent like Add's and found
// the parent again: created again meanwhile, under which another Add
// may have stored those same items. Add then runs again, on the new
// parent, and takes effect after its creation.
var errParentBack = errors.New("the parent was created again while Add deleted its items")

// takeBack deletes what an Add that failed for want of a parent, or for a
// parent too large, stored: its items when the parent is missing, or was
// deleted after Add found it (errParentGone; see dropThenRecheck); when the
// parent would be too large, those the subset does not hold (read once
// more), so that no later recomputation meets them. It returns cause,
// errParentBack, or, when it cannot delete them, its own failure (see
// leftBehind).
func (r *Repo[P, I]) takeBack(ctx context.Context, p plan, parent parentRef, entries []entry, cause error) error {
	const remedy = "Add again deletes them"
	var drop []bson.RawValue
	switch {
	case errors.Is(cause, patterns.ErrNotFound), errors.Is(cause, errParentGone):
		return r.dropThenRecheck(ctx, p, parent, entries, cause)
	case errors.Is(cause, patterns.ErrTooLarge):
		st, err := r.readParent(ctx, p, r.cmd.parent(parent.id))
		if err != nil && !errors.Is(err, patterns.ErrNotFound) {
			return leftBehind(cause, "the read of the parent", remedy, err)
		}
		for _, e := range entries {
			if !st.holds(e.id) {
				drop = append(drop, e.id)
			}
		}
	}
	return r.dropItems(ctx, parent, drop, cause, remedy)
}

// dropThenRecheck deletes the parent's items with the ids of the entries (one
// deleteMany per idBatches: deleteItems), which this Add or an earlier attempt stored,
// after Add found the parent missing (cause). A deletion that deleted some
// reads the parent again (one find): the application may have created it
// again before the deletion, and another call stored items with those ids
// under it, which the deletion cannot tell from this Add's (an equality on
// their fields would not do: a map field encodes its keys in another
// order at each call, and a version with a field more matches too). Then
// it returns errParentBack, and Add runs again, so that the items are
// stored and in the subset when it returns: as this Add has them (see
// Add's godoc). Otherwise it returns cause, or its own failure.
func (r *Repo[P, I]) dropThenRecheck(ctx context.Context, p plan, parent parentRef, entries []entry, cause error) error {
	deleted, err := r.deleteItems(ctx, parent, ids(entries))
	if err != nil {
		return leftBehind(cause, "their deletion", "Add again deletes them", err)
	}
	if deleted == 0 {
		return cause
	}
	_, err = r.readParent(ctx, p, r.cmd.parent(parent.id))
	switch {
	case errors.Is(err, patterns.ErrNotFound):
		return cause
	case err != nil:
		return fmt.Errorf("%v; the items were deleted, and the read of the parent that follows failed (Add again stores them if it was created again): %w", cause, err)
	}
	return errParentBack
}

// dropItems deletes the items drop of parent, which a failed Add stored,
// and returns cause; or, when it cannot, its own failure (see
// leftBehind). It sends nothing for no items.
func (r *Repo[P, I]) dropItems(ctx context.Context, parent parentRef, drop []bson.RawValue, cause error, remedy string) error {
	if len(drop) == 0 {
		return cause
	}
	if _, err := r.deleteItems(ctx, parent, drop); err != nil {
		return leftBehind(cause, "their deletion", remedy, err)
	}
	return cause
}

// deleteItems deletes the parent's items with the ids (one deleteMany per
// idBatches, each retried after a transient failure) and returns how
// many it deleted.
func (r *Repo[P, I]) deleteItems(ctx context.Context, parent parentRef, ids []bson.RawValue) (int64, error) {
	var deleted int64
	for batch := range idBatches(ids) {
		res, err := write(ctx, func() (*mongo.DeleteResult, error) { return r.items.DeleteMany(ctx, r.cmd.itemsIn(parent.id, batch)) })
		if err != nil {
			return deleted, err
		}
		deleted += res.DeletedCount
	}
	return deleted, nil
}

// leftBehind is the error of an Add that failed for cause and could not
// take back the items it stored, because what failed with err: cause is
// in the message but not in the chain, since the sentinel it wraps
// (patterns.ErrNotFound, ErrTooLarge, ErrInvalid) tells the caller that
// nothing is stored (Add's godoc), which is then unknown; remedy says how
// to finish the job.
func leftBehind(cause error, what, remedy string, err error) error {
	return fmt.Errorf("%v; the items stored may remain, for %s failed (%s): %w", cause, what, remedy, err)
}

func (r *Repo[P, I]) addPush(ctx context.Context, p plan, parent parentRef, entries []entry) error {
	// The parent is read before the insert: an Add that found it takes
	// effect then, whatever happens to its items before the push. Without
	// the read, an Add that started with the parent missing could insert
	// its items as orphans, see them deleted as such (a Delete, a Remove
	// of one, another Add that found the parent missing), then push into
	// the parent created meanwhile and, its count finding them gone as
	// after a Remove, return nil with them stored nowhere (issue 34). The
	// read names the incarnation (stamped first, if new), to which the
	// push is bound: a parent deleted and created again after the read
	// is not the one Add found.
	raw, err := r.findParent(ctx, r.cmd.parent(parent.id), r.cmd.parentFound())
	if err != nil {
		return err
	}
	st, err := r.decodeParent(raw)
	if err != nil {
		return err
	}
	if st, err = r.ensureStamped(ctx, p, parent.id, st); err != nil {
		return err
	}
	return gone(r.push(ctx, p, parent, entries, st.incarnation()))
}

// push is the push path's Add after its read of the parent, in
// incarnation inc: the insert, the guarded push and its count, or a
// recomputation.
func (r *Repo[P, I]) push(ctx context.Context, p plan, parent parentRef, entries []entry, inc int64) error {
	pending, err := r.insert(ctx, parent, entries)
	if err != nil {
		return err
	}
	if len(pending) > maxPushItems || pushSize(pending) > patterns.MaxDocumentSize {
		// One update cannot carry them, or the count would match each
		// of many: the subset is recomputed, as on the portable path.
		st, err := r.readParent(ctx, p, r.cmd.parent(parent.id))
		if err != nil {
			return err
		}
		return r.recompute(ctx, p, parent.id, st, true, inc)
	}
	res, err := write(ctx, func() (*mongo.UpdateResult, error) {
		return r.parents.UpdateOne(ctx, r.cmd.pushFilter(parent.id, inc, ids(pending)), r.cmd.pushUpdate(docs(pending), bson.NewObjectID()))
	})
	if errors.Is(err, patterns.ErrTooLarge) {
		return fmt.Errorf("push into the subset: %w", err)
	}
	if err == nil && res.MatchedCount == 1 {
		return r.settlePush(ctx, p, parent, pending)
	}
	// No parent, another incarnation, the subset holds some of the items
	// already, a recomputation announced (pushFilter), or the push failed.
	st, rerr := r.readParent(ctx, p, r.cmd.parent(parent.id))
	if rerr != nil {
		return rerr
	}
	if err != nil && !st.notArray {
		return fmt.Errorf("push into the subset: %w", err)
	}
	// The subset holds some of the items (an earlier attempt or a
	// recomputation put them there), or its field holds something $push
	// cannot extend, most often null (a nil slice stored without
	// omitempty), which the projection of the subset's ids leaves out as
	// it leaves out an absent field. Pushing only the absent items would
	// not do: a recomputation in flight that read the items collection
	// before this Add's insert (a Remove of one of them, say) may drop
	// the others from the subset when its compare-and-set lands. A
	// recomputation read after the insert sets the subset, and moves the
	// revision, so that such a compare-and-set fails and reads again. A
	// parent of another incarnation gives errRecreated: Add's items were
	// inserted after the deletion of the one it found (see Add).
	return r.recompute(ctx, p, parent.id, st, true, inc)
}

// maxPushItems is the most items Add pushes: past it, it recomputes
// the subset in place of the push and its count (one command more), whose
// filter names each item pushed, as one alternative of an $or (FerretDB
// 2.7 took 40 seconds for 10,000, and was killed for memory at 25,000),
// while a recomputation reads Cap items whatever the number added.
const maxPushItems = 100

// pushSize is the size of what the push of the entries carries: each
// one an element of its $each (the document) and of its filter's $nin
// (the id), each element a type byte, its index as a decimal key and a
// NUL, and the value. Past patterns.MaxDocumentSize no update statement
// holds them: MongoDB refuses a command's document past 16 MiB and 16
// KiB (BSONObjMaxInternalSize, error 10334), which leaves the 16 KiB for
// the rest of the statement (its field names, the parent's _id, $sort
// and $slice); the driver, a command past 48,000,000 bytes.
func pushSize(entries []entry) int {
	n := 0
	for i, e := range entries {
		n += 2*(1+len(strconv.Itoa(i))+1) + len(e.doc) + len(e.id.Value)
	}
	return n
}

// settlePush counts the pushed items stored as pushed in the items
// collection (one aggregate, on the parent's items: the index of Indexes
// serves its parent field) and, when a concurrent writer removed one of
// them after the insert, or replaced it with another version (an Update,
// or a Remove and an Add), so that the push put an item in the subset
// that is not stored as it holds it (and that the other writer's
// recomputation, which read the parent before the push, kept as pushed
// since), recomputes the subset from a read of the parent. The push took
// effect in the incarnation Add read; the recomputation follows the
// parent to whatever incarnation it finds (created again since, or with
// a revision another writer rewrote), whose subset it sets from the
// items stored, as a Rebuild would: Add's items went with the deleted
// one, which [Repo.Delete] deletes after the parent, so after the insert.
func (r *Repo[P, I]) settlePush(ctx context.Context, p plan, parent parentRef, pushed []entry) error {
	patterns.OperationFrom(ctx).Sent(1)
	n, err := r.items.CountDocuments(ctx, r.cmd.itemsAsPushed(parent.id, docs(pushed)))
	if err != nil {
		return fmt.Errorf("count the items pushed: %w", err)
	}
	if n == int64(len(pushed)) {
		return nil
	}
	st, err := r.readParent(ctx, p, r.cmd.parent(parent.id))
	if err != nil {
		return err
	}
	return r.recompute(ctx, p, parent.id, st, true, 0)
}

func (r *Repo[P, I]) addPortable(ctx context.Context, p plan, parent parentRef, entries []entry) error {
	// Stamped before the insert, as the push plan's read (see addPush):
	// the recomputation is bound to the incarnation Add found.
	st, err := r.readParent(ctx, p, r.cmd.parent(parent.id))
	if err != nil {
		return err
	}
	if st, err = r.ensureStamped(ctx, p, parent.id, st); err != nil {
		return err
	}
	if _, err := r.insert(ctx, parent, entries); err != nil {
		return err
	}
	return gone(r.recompute(ctx, p, parent.id, st, false, st.incarnation()))
}

// insert stores the entries in the items collection with unordered
// insertManys (one per batch, its statements that failed with a
// transient error sent again, alone: see insertOnce) and returns the
// documents to push: the entries, except that an item whose id was stored
// under the parent already (by an earlier attempt, or concurrently) comes
// back in its stored version, read with one more find. An id the insert
// finds taken that no item of the parent holds is inserted again, and
// read again if taken again (two commands more): a concurrent Remove may
// have deleted the item between the insert and the read, and then this
// Add comes after it. From the second such read on, insert first reads
// whether another document holds the id (takenElsewhere, one command
// more): then the id is another parent's, and insert deletes what it
// inserted and returns patterns.ErrInvalid; otherwise the item was
// removed again, and it inserts it again. An item stored and removed
// again between each of maxAttempts inserts and their reads gives
// patterns.ErrConflict (soak seed 16720569214792909661, portable,
// FerretDB 2.7: the second removal gave ErrInvalid). On any other write
// error it deletes what it inserted and returns the error.
func (r *Repo[P, I]) insert(ctx context.Context, parent parentRef, entries []entry) ([]entry, error) {
	var inserted []bson.RawValue
	undo := func(cause error) error {
		return r.dropItems(ctx, parent, inserted, cause, "Add them again without the bad ones, or Remove them")
	}
	stored := map[string]entry{}
	todo := entries
	for attempt := 1; ; attempt++ {
		done, dups, err := r.insertOnce(ctx, todo)
		inserted = append(inserted, done...)
		if err != nil {
			return nil, undo(err)
		}
		if len(dups) == 0 {
			break
		}
		found, err := r.storedItems(ctx, parent, dups)
		if err != nil {
			return nil, undo(err)
		}
		maps.Copy(stored, found)
		var gone []bson.RawValue
		for _, id := range dups {
			if _, ok := found[bsonid.Key(id)]; !ok {
				gone = append(gone, id)
			}
		}
		if len(gone) == 0 {
			break
		}
		again := make(map[string]bool, len(gone))
		for _, id := range gone {
			again[bsonid.Key(id)] = true
		}
		todo = slices.DeleteFunc(slices.Clone(todo), func(e entry) bool { return !again[bsonid.Key(e.id)] })
		if attempt == 1 {
			continue
		}
		foreign, err := r.takenElsewhere(ctx, parent, todo)
		switch {
		case err != nil:
			return nil, undo(err)
		case len(foreign) > 0:
			return nil, undo(errs.Invalid("item ids %v are taken by items that are not the parent's", foreign))
		case attempt == maxAttempts:
			return nil, undo(fmt.Errorf("item ids %v were found taken, then not stored, after each of %d inserts (removed again each time, or a unique index of the items collection other than the repository's holds one of their values): %w", texts(ids(todo)), attempt, patterns.ErrConflict))
		}
	}
	out := make([]entry, len(entries))
	for i, e := range entries {
		if s, ok := stored[bsonid.Key(e.id)]; ok {
			e = s
		}
		out[i] = e
	}
	return out, nil
}

// insertOnce inserts the entries with unordered insertManys, one per
// batch (insertBatches), and returns the ids it inserted and those it
// found taken (a duplicate key); an error other than duplicates comes
// with the ids inserted all the same, except those of a command whose
// reply does not say which were. The statements that failed with a
// transient error (FerretDB 2.x's deadlock, which applied nothing) are
// sent again alone (srverr.RetryStatements), never one that applied:
// sent again, an item that a concurrent Remove deleted meanwhile would be
// stored again after that Remove returned nil, its deletion undone (soak
// seed 16516763299255108337, native, FerretDB 2.7). A command that failed
// whole with one applied nothing, and is sent again whole: which is why
// each batch is one command (the driver splits an insertMany past
// 48,000,000 bytes into several, and returns a command error of one of
// them alone, after the others applied).
func (r *Repo[P, I]) insertOnce(ctx context.Context, entries []entry) (inserted, dups []bson.RawValue, err error) {
	op := patterns.OperationFrom(ctx)
	var other error // the first error of a statement, but a duplicate or transient one
	for batch := range insertBatches(entries, r.insertBatch) {
		err = srverr.RetryStatements(ctx, len(batch), func(todo []int) error {
			op.Sent(1)
			sent := make([]bson.Raw, len(todo))
			for k, i := range todo {
				sent[k] = batch[i].doc
			}
			_, err := r.items.InsertMany(ctx, sent, unordered)
			return err
		}, func(done []int) {
			for _, i := range done {
				inserted = append(inserted, batch[i].id)
			}
			op.Affected(int64(len(done)))
		}, func(i int, we mongo.WriteError) bool {
			if mongo.IsDuplicateKeyError(we) {
				dups = append(dups, batch[i].id)
				return false
			}
			if other == nil {
				other = fmt.Errorf("insert item %s: %w", bsonid.Text(batch[i].id), srverr.Classify(we))
			}
			return true
		})
		if err != nil {
			break
		}
	}
	switch {
	case other != nil:
		err = other
	case err != nil:
		err = fmt.Errorf("insert the items: %w", srverr.Classify(err))
	}
	return inserted, dups, err
}

// insertBatchBytes and insertBatchCount bound the batches of
// insertBatches: far under the 48,000,000 bytes of a message and the
// statements of a write (maxMessageSizeBytes and maxWriteBatchSize), so
// that the driver sends each batch as one command (driver v2.10.0,
// x/mongo/driver/batches.go, AppendBatchSequence, splits a write's
// documents at either limit). FerretDB 2.7 reports a maxWriteBatchSize of
// 100,000 as MongoDB does, and refuses a write of more than 25,000
// statements ("Write batch sizes must be between 1 and 25000"): 10,000
// holds on every server.
const (
	insertBatchBytes = 2 * patterns.MaxDocumentSize
	insertBatchCount = 10_000
)

// insertBatches yields the entries in batches of at most insertBatchCount
// entries and maxBytes bytes of documents (insertBatchBytes but in
// tests).
func insertBatches(entries []entry, maxBytes int) iter.Seq[[]entry] {
	return batches(entries, func(e entry) int { return len(e.doc) }, maxBytes, insertBatchCount)
}

// idBatchBytes bounds the bytes of ids that one command of Add names in
// an $in (a read of the items stored, a deletion of those it inserted),
// with insertBatchCount ids: so that the command stays under MongoDB's
// 16 MiB and 16 KiB (BSONObjMaxInternalSize) whatever the number of
// items, whose documents may take 16 MiB each.
const idBatchBytes = patterns.MaxDocumentSize / 2

// idBatches yields the ids in batches for an $in each (see
// idBatchBytes): each id an element, its type byte, index key and NUL
// counted with its value.
func idBatches(ids []bson.RawValue) iter.Seq[[]bson.RawValue] {
	return batches(ids, func(id bson.RawValue) int { return len(id.Value) + 8 }, idBatchBytes, insertBatchCount)
}

// batches yields xs in consecutive batches of at most maxCount values
// and maxBytes bytes (by size), each with one value at least.
func batches[T any](xs []T, size func(T) int, maxBytes, maxCount int) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for len(xs) > 0 {
			n, total := 0, 0
			for n < len(xs) && n < maxCount && (n == 0 || total+size(xs[n]) <= maxBytes) {
				total += size(xs[n])
				n++
			}
			if !yield(xs[:n]) {
				return
			}
			xs = xs[n:]
		}
	}
}

// takenElsewhere reads which of the entries, whose ids an insert found
// taken and the parent's items did not hold, another document holds the
// place of (see commands.takenElsewhere; one find, of _ids alone, per
// batch of ids as idBatches makes them), and returns their ids as text.
func (r *Repo[P, I]) takenElsewhere(ctx context.Context, parent parentRef, entries []entry) ([]string, error) {
	var out []string
	for batch := range batches(entries, func(e entry) int { return 2 * (len(e.id.Value) + 8) }, idBatchBytes, insertBatchCount) {
		docIDs := make([]bson.RawValue, len(batch))
		for i, e := range batch {
			docIDs[i] = e.doc.Lookup("_id") // encode gives every item an _id
		}
		found, err := r.findItems(ctx, r.cmd.takenElsewhere(parent.id, ids(batch), docIDs), r.cmd.idsOnly())
		if err != nil {
			return nil, fmt.Errorf("read the documents that hold the ids: %w", err)
		}
		taken := make(map[string]bool, len(found))
		for _, d := range found {
			taken[bsonid.Key(d.Lookup("_id"))] = true
		}
		for i, e := range batch {
			if taken[bsonid.Key(docIDs[i])] {
				out = append(out, bsonid.Text(e.id))
			}
		}
	}
	return out, nil
}

// texts returns the ids as text, for an error.
func texts(ids []bson.RawValue) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = bsonid.Text(id)
	}
	return out
}

var unordered = options.InsertMany().SetOrdered(false)

// storedItems reads the parent's items with the ids (one find per
// idBatches), by bsonid.Key of their ids.
func (r *Repo[P, I]) storedItems(ctx context.Context, parent parentRef, ids []bson.RawValue) (map[string]entry, error) {
	out := make(map[string]entry, len(ids))
	for batch := range idBatches(ids) {
		found, err := r.findItems(ctx, r.cmd.itemsIn(parent.id, batch))
		if err != nil {
			return nil, fmt.Errorf("read the stored items: %w", err)
		}
		for _, d := range found {
			id, err := d.LookupErr(r.cfg.IDField)
			if err != nil {
				return nil, fmt.Errorf("stored item without %s: %s", r.cfg.IDField, d)
			}
			out[bsonid.Key(id)] = entry{doc: d, id: id}
		}
	}
	return out, nil
}

// ids returns the ids of the entries.
func ids(entries []entry) []bson.RawValue {
	out := make([]bson.RawValue, len(entries))
	for i, e := range entries {
		out[i] = e.id
	}
	return out
}

// docs returns the documents of the entries.
func docs(entries []entry) []bson.Raw {
	out := make([]bson.Raw, len(entries))
	for i, e := range entries {
		out[i] = e.doc
	}
	return out
}
