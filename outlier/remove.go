package outlier

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Remove removes the item with the given id from wherever it lives: the
// parent's array or an overflow document (whose count it lowers). Overflow
// documents are not compacted: items never move, so removing one leaves a
// hole, a document emptied by removals stays (with count 0) and the parent
// stays overflowed (flag true) even if every overflow item is removed.
// Appends keep going to the newest overflow document, never back to the
// parent or into an older document, which is what keeps the append order.
// A parent that Remove left with fewer than Cap items takes no new
// items once overflowed.
//
// Only a parent whose flag is true has overflow: Remove looks in overflow
// documents only after it read the flag true, so that those with the id
// of a parent whose flag is false (a deleted parent's, left by a Delete
// that failed between its two deletes, before the parent was inserted
// again) are not its own: Remove leaves them, and an item held only there
// is [patterns.ErrNotFound].
//
// Cost where the server has [patterns.FeaturePullConditions] and
// [patterns.FeaturePipelineUpdates] (MongoDB, FerretDB 2.x): 1 command when
// the item is in the parent (an update with $pull by id, of the parent
// while it holds the id or its flag is true), 2 when it is in overflow
// (the parent's update matches the parent by its flag and pulls nothing,
// then a pipeline update of the overflow document that removes the item
// and lowers the count by the number of copies removed). Without $pull
// conditions (FerretDB 1.x), Remove reads the parent's array and flag
// first and pulls the elements holding the id whole; without pipeline
// updates, it reads the overflow document
// holding the item (indexed) and pulls them whole with $pullAll: on a
// server with neither, 2 commands for an item in the parent, 3 for one in
// overflow. Each write is atomic: a reader sees the item or
// not. Each is guarded on the item being where it was found (where the
// elements are pulled whole, on the elements as read, compared whole), so
// a Remove that lost a race to another removes nothing, lowers no count
// and returns [patterns.ErrNotFound]; one whose elements an [Repo.Update]
// rewrote between the read and the write matches nothing and reads again
// (after 100 such misses in a row, [patterns.ErrConflict]). A Remove that
// returns nil removed the item. Each write is sent again after a
// transient failure that applied nothing (FerretDB 2.x's deadlock). Ids are compared as the server compares them; every
// copy of the id in the place found is removed, and an overflow
// document's count goes down by the number removed. If the
// item is in neither place (or the parent does not exist) it returns
// [patterns.ErrNotFound] (after one command when the flag is false); bad
// ids wrap [patterns.ErrInvalid]. Calling
// Remove again after a failure (a lost connection) is safe: if the failed
// call removed the item, the retry reports [patterns.ErrNotFound].
func (r *Repo[P, I]) Remove(ctx context.Context, parentID, itemID any) (err error) {
	ctx, op := r.start(ctx, "Remove")
	defer op.Finish(&err)
	if err := validParent("Remove", parentID); err != nil {
		return err
	}
	if err := patterns.ValidateID(itemID); err != nil {
		return fail("Remove", parentID, fmt.Errorf("item id: %w", err))
	}
	p, err := r.plan(ctx)
	if err != nil {
		return fail("Remove", parentID, err)
	}
	removed, err := r.remove(ctx, p, parentID, itemID)
	if err == nil && !removed {
		err = fmt.Errorf("item %s: no such item: %w", bsonid.Text(itemID), patterns.ErrNotFound)
	}
	return fail("Remove", parentID, err)
}

// removal is what became of one attempt of Remove in one place.
type removal int

const (
	absent     removal = iota // the place does not hold the item (the parent: nor has it overflow)
	removed                   // the item was removed
	changed                   // the item was found, and changed before the write (portable): read again
	overflowed                // the parent does not hold the item and its flag is true: look in its overflow
)

// remove removes the item from the parent or, if the parent does not hold
// it, from the overflow document that does; it reports whether it removed
// it. Where the elements are pulled whole (without
// [patterns.FeaturePullConditions] or [patterns.FeaturePipelineUpdates]),
// a write that an Update of the item beat (its filter requires the
// elements as read) matches nothing, and remove reads again.
func (r *Repo[P, I]) remove(ctx context.Context, p plan, parentID, itemID any) (bool, error) {
	t, data, err := bson.MarshalValue(itemID)
	if err != nil {
		return false, err
	}
	key := bsonid.Key(bson.RawValue{Type: t, Value: data})
	for range maxMisses {
		out, err := r.removeFromParent(ctx, p, parentID, itemID, key)
		if err == nil && out == overflowed {
			out, err = r.removeFromOverflow(ctx, p, parentID, itemID, key)
		}
		if err != nil || out != changed {
			return out == removed, err
		}
		patterns.OperationFrom(ctx).Lost()
	}
	return false, lost("the item")
}

// removeFromParent removes the item from the parent's array, by a $pull
// condition or, without [patterns.FeaturePullConditions], by the elements
// read first. It reports overflowed when the parent does not hold the
// item and its flag is true, and absent when the flag is false (or the
// parent is missing): overflow documents of a parent whose flag is false
// are a deleted parent's, left by a Delete that failed between its two
// deletes, and hold none of its items.
func (r *Repo[P, I]) removeFromParent(ctx context.Context, p plan, parentID, itemID any, key string) (removal, error) {
	if p.pullByCondition {
		filter, update := r.removeParentNative(parentID, itemID)
		res, err := updateOne(ctx, r.parents, filter, update)
		switch {
		case err != nil:
			return absent, err
		case res.ModifiedCount == 1:
			return removed, nil
		case res.MatchedCount == 1:
			return overflowed, nil // matched by the flag: nothing to pull
		}
		return absent, nil
	}
	parent, err := r.findParent(ctx, parentID, r.embeddedProjection())
	if err != nil {
		return absent, err
	}
	arr, err := r.array(parent)
	if err != nil {
		return absent, err
	}
	elems, err := r.matching(arr, key)
	if err != nil {
		return absent, err
	}
	if len(elems) == 0 {
		if r.flagged(parent) {
			return overflowed, nil
		}
		return absent, nil
	}
	filter, update := r.removeParentPortable(parentID, elems)
	res, err := updateOne(ctx, r.parents, filter, update)
	return removalOf(res, err, changed)
}

// removeFromOverflow removes the item from the overflow document holding
// it: by one pipeline update, or, without
// [patterns.FeaturePipelineUpdates], by reading the document and pulling
// its elements holding the id whole.
func (r *Repo[P, I]) removeFromOverflow(ctx context.Context, p plan, parentID, itemID any, key string) (removal, error) {
	if p.pipelineUpdates {
		filter, update := r.removeOverflowNative(parentID, itemID)
		res, err := updateOne(ctx, r.overflow, filter, update)
		return removalOf(res, err, absent)
	}
	patterns.OperationFrom(ctx).Sent(1)
	doc, err := r.overflow.FindOne(ctx, r.holderFilter(parentID, itemID),
		options.FindOne().SetProjection(holderProjection)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return absent, nil
	}
	if err != nil {
		return absent, err
	}
	items, ok := doc.Lookup(fItems).ArrayOK()
	if !ok {
		return absent, fmt.Errorf("overflow document %v has no items array", doc.Lookup("_id"))
	}
	elems, err := r.matching(items, key)
	if err != nil || len(elems) == 0 {
		return absent, err
	}
	filter, update := r.removeOverflowPortable(doc.Lookup("_id"), elems)
	res, err := updateOne(ctx, r.overflow, filter, update)
	return removalOf(res, err, changed)
}

// removalOf reads the result of a removal's write: removed when it
// matched, miss otherwise (absent for a write by id, which matches while
// the item is there; changed for one by the elements read).
func removalOf(res *mongo.UpdateResult, err error, miss removal) (removal, error) {
	switch {
	case err != nil:
		return absent, err
	case res.MatchedCount == 1:
		return removed, nil
	}
	return miss, nil
}

// matching returns the elements of arr whose item id has the key, as
// stored, for a $pullAll.
func (r *Repo[P, I]) matching(arr bson.RawArray, key string) (bson.A, error) {
	vals, err := arr.Values()
	if err != nil {
		return nil, err
	}
	var out bson.A
	for _, v := range vals {
		if doc, ok := v.DocumentOK(); ok {
			if id, err := doc.LookupErr(r.cfg.IDField); err == nil && bsonid.Key(id) == key {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// Delete deletes the parent and its overflow documents: 2 commands, a
// deleteOne of the parent, then a deleteMany of the overflow documents by
// the {parent, seq} index. A reader between the two sees no parent
// ([patterns.ErrNotFound]); the overflow documents left are never read.
// If Delete fails between the two, or an Append opening a new overflow
// document runs concurrently, overflow documents may be left behind:
// Delete again removes them (it always sends the deleteMany) and returns
// [patterns.ErrNotFound], as it does for a parent that does not exist. A
// parent inserted again with the same id does not take them for its own:
// until its flag is true no operation that starts after the Insert reads
// or writes them (Get, Items, Page, Count, Update and Remove look in
// overflow only after they read the flag true), and the Append that first
// overflows it deletes them (see [Repo.Append]).
// Both deletes are idempotent, and sent again after a transient failure
// that applied nothing (FerretDB 2.x's deadlock). A delete of the parent
// that matched nothing is checked with a find of its _id, one more
// command, and sent again while the parent is there (FerretDB 2.x
// answers no match for a document that a concurrent update is rewriting,
// and leaves it); after 5 such answers Delete returns
// [patterns.ErrConflict] with the parent in place and its overflow
// documents untouched.
func (r *Repo[P, I]) Delete(ctx context.Context, parentID any) (err error) {
	ctx, op := r.start(ctx, "Delete")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return pkg.Wrap("Delete", err)
	}
	if err := validParent("Delete", parentID); err != nil {
		return err
	}
	deleted, err := srverr.DeleteOne(ctx, r.parents, parentFilter(parentID))
	if err != nil {
		return fail("Delete", parentID, err)
	}
	if deleted {
		op.Affected(1)
	}
	err = srverr.Retry(ctx, func() error {
		op.Sent(1)
		res, err := r.overflow.DeleteMany(ctx, overflowFilter(parentID))
		if err == nil {
			op.Affected(res.DeletedCount)
		}
		return err
	})
	if err != nil {
		return fail("Delete", parentID, err)
	}
	if !deleted {
		return fail("Delete", parentID, errNoParent)
	}
	return nil
}
