package subset

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Remove deletes one item of the parent from the items collection, then
// recomputes the subset from the items collection, so that when the item
// leaves a full subset the next most relevant item takes its place. It
// sends four commands: deleteOne, a read of the parent's revision, a find
// of the first Cap items and the compare-and-set of the subset; five on a
// parent that no Add or recomputation has written yet (its items loaded
// without the repository), whose revision it stamps first (see the
// package documentation). Under
// concurrent writers it sends at most two compare-and-sets, with a read
// of the parent after each lost race, however many others compete (see
// the package documentation), and on the push path one more (and one
// command, a findAndModify that announces it) after an Add whose push,
// between its find and its compare-and-set, left the subset full: it does
// not fail because others add items.
// Between the delete and the set, a reader of the subset may still see
// the item. Its writes are retried after a transient failure
// (FerretDB 2.x's "deadlock detected"). A delete that matches nothing is
// checked with a find of the item (one command more), and sent again
// while the item is there: FerretDB 2.x answers a delete of an item that
// another writer is updating with no match. After 5 such answers Remove
// returns [patterns.ErrConflict], with the item stored and the subset as
// it was.
//
// It is safe to retry: when the item is no longer stored but the subset
// still holds it (an earlier Remove failed after its delete), Remove
// finishes that job: after the read of the parent holding the item, it
// deletes it again (an Add may have stored it since, and pushed it:
// Remove then deletes it, comes after that Add, and reads the parent
// again) before its recomputation (two commands more: the delete and the
// find of the item that follows a delete that matched nothing; two as
// well when it deletes the item: the delete and the read); with
// Config.CountField, when the item is in neither
// place, Remove reads the parent and counts its items, and recomputes
// when the count is not the number of items (an earlier Remove of an item
// out of the subset failed after its delete): three commands more. It returns [patterns.ErrNotFound] when the item is in
// neither place (so a retry after a call that did the whole job but lost
// its reply reports it), and when the parent does not exist. So of two
// Removes of one item that overlap, both may return nil: the second may
// find the item deleted by the first and still in the subset, and finish
// the job as after a failed Remove. A Remove whose parent a [Repo.Delete]
// deletes after Remove's delete returns ErrNotFound too, the item deleted
// (which a reader may have seen gone before the parent was): Remove
// cannot tell that parent from one missing before it started. An item of a
// missing parent (an orphan, which [Repo.Delete] deletes too) is deleted
// all the same.
//
// An Add of the same item that overlaps its Remove leaves, once both
// have returned, the item stored or not, as one order of the two calls
// gives, and the subset the first Cap items. While they run, a reader of
// the subset may see the item there that the items collection no longer
// holds, in the version that Add pushed (a Remove between the insert and
// the push of an Add on the push path: the Add's recomputation takes it
// out before the Add returns).
func (r *Repo[P, I]) Remove(ctx context.Context, parentID, itemID any) (err error) {
	ctx, op := r.start(ctx, "Remove")
	defer op.Finish(&err)
	if err := patterns.ValidateID(parentID); err != nil {
		return fail("Remove", fmt.Errorf("parent id: %w", err))
	}
	if err := patterns.ValidateID(itemID); err != nil {
		return fail("Remove", fmt.Errorf("parent %s: item id: %w", idOf(parentID), err))
	}
	if err := r.remove(ctx, parentID, itemID); err != nil {
		return fail("Remove", fmt.Errorf("parent %s: item %s: %w", idOf(parentID), idOf(itemID), err))
	}
	return nil
}

func (r *Repo[P, I]) remove(ctx context.Context, parentID, itemID any) error {
	p, err := r.plan(ctx)
	if err != nil {
		return err
	}
	deleted, err := r.deleteItem(ctx, parentID, itemID)
	if err != nil {
		return err
	}
	if !deleted {
		st, err := r.readParent(ctx, p, r.cmd.parentHolding(parentID, itemID))
		if errors.Is(err, patterns.ErrNotFound) {
			if err := r.settleCount(ctx, p, parentID); err != nil {
				return err
			}
			return fmt.Errorf("no such item, and no parent holding it: %w", patterns.ErrNotFound)
		}
		if err != nil {
			return err
		}
		// The subset holds the item the delete found stored nowhere:
		// an earlier Remove failed after its delete, or an Add stored
		// and pushed the item since, which this Remove, returning nil,
		// must delete (soak seed 11538016981522827133, native, FerretDB
		// 2.7: the recomputation kept it, stored). So it deletes again;
		// when that finds nothing either, the read above came after
		// every change this Remove made.
		if deleted, err = r.deleteItem(ctx, parentID, itemID); err != nil || !deleted {
			if err != nil {
				return err
			}
			return r.recompute(ctx, p, parentID, st, true, 0)
		}
	}
	st, err := r.readParent(ctx, p, r.cmd.parent(parentID))
	if err != nil {
		return err
	}
	return r.recompute(ctx, p, parentID, st, true, 0)
}

// deleteItem deletes one item of the parent (srverr.DeleteOne: a delete,
// and a find of the item when it matches nothing) and says whether it
// did.
func (r *Repo[P, I]) deleteItem(ctx context.Context, parentID, itemID any) (bool, error) {
	deleted, err := srverr.DeleteOne(ctx, r.items, r.cmd.item(parentID, itemID))
	if err != nil {
		return false, fmt.Errorf("delete the item: %w", srverr.Classify(err))
	}
	if deleted {
		patterns.OperationFrom(ctx).Affected(1)
	}
	return deleted, nil
}

// settleCount finishes the job of an earlier Remove that deleted an item
// out of the subset and failed before its recomputation set the count:
// with a count field, it reads the parent and counts its items, and
// recomputes when the count differs (three commands more); a missing
// parent is left to the caller. It sends nothing without a count field.
func (r *Repo[P, I]) settleCount(ctx context.Context, p plan, parentID any) error {
	if r.cfg.CountField == "" {
		return nil
	}
	st, err := r.readParent(ctx, p, r.cmd.parent(parentID))
	if errors.Is(err, patterns.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	n, err := r.countItems(ctx, parentID)
	if err != nil || (st.hasCount && st.count == n) {
		return err
	}
	return r.recompute(ctx, p, parentID, st, true, 0)
}

// Update replaces one item of the parent (the item with the same id) in
// the items collection, then recomputes the subset from the items
// collection, so that an item whose sort value changed enters, moves in or
// leaves the subset. It sends four commands (five with the stamp) and
// bounds its compare-and-sets like [Repo.Remove], and a reader may see the old
// version in the subset until the last one; an Add of the same item that
// overlaps it may push the version it read after Update's recomputation,
// which a reader then sees until that Add's recomputation takes it out,
// before the Add returns (see [Repo.Add]). It is safe to retry, and its
// writes are retried after a transient failure, as Remove's. The item is
// validated like one given to [Repo.Add] ([patterns.ErrInvalid],
// [patterns.ErrTooLarge], nothing written); a missing item or parent gives
// [patterns.ErrNotFound], and so does a parent that a [Repo.Delete]
// deletes after Update's replacement, the item replaced (which a reader
// may have seen before the parent was deleted).
//
// When the new version would take the parent past 16 MiB (because of the
// parent's own fields), Update returns [patterns.ErrTooLarge] after
// replacing the item: the items collection holds the new version, the
// subset keeps the old one until the parent has room and [Repo.Rebuild]
// runs. Remove and Rebuild report the same condition the same way.
func (r *Repo[P, I]) Update(ctx context.Context, parentID any, item I) (err error) {
	ctx, op := r.start(ctx, "Update")
	defer op.Finish(&err)
	parent, err := newParentRef(r.cfg.ParentField, parentID)
	if err != nil {
		return fail("Update", err)
	}
	e, err := r.encode(item, parent, false)
	if err != nil {
		return fail("Update", fmt.Errorf("%s: %w", parent, err))
	}
	if err := r.update(ctx, parent, e); err != nil {
		return fail("Update", fmt.Errorf("%s: item %s: %w", parent, bsonid.Text(e.id), err))
	}
	return nil
}

func (r *Repo[P, I]) update(ctx context.Context, parent parentRef, e entry) error {
	p, err := r.plan(ctx)
	if err != nil {
		return err
	}
	res, err := write(ctx, func() (*mongo.UpdateResult, error) {
		return r.items.ReplaceOne(ctx, r.cmd.item(parent.id, e.id), e.doc)
	})
	if err != nil {
		return fmt.Errorf("replace the item: %w", err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("no such item: %w", patterns.ErrNotFound)
	}
	return r.rebuild(ctx, p, parent.id)
}

// Rebuild recomputes the parent's subset from the items collection: to
// repair it, to fill it for parents whose items were loaded without the
// repository, or to apply a new Cap. It sends three commands (a read of
// the revision, a find of the first Cap items, the compare-and-set; four
// for a parent without a revision, which it stamps first: see the
// package documentation), at
// most two compare-and-sets under concurrent writers, and on the push
// path one more after a push that left the subset full (see
// [Repo.Remove]),
// and writes the subset in one atomic update, so a reader sees the old
// subset or the new one; it is safe to retry. A missing parent gives
// [patterns.ErrNotFound]; a parent that its first Cap items would take
// past 16 MiB gives [patterns.ErrTooLarge] and keeps its subset.
func (r *Repo[P, I]) Rebuild(ctx context.Context, parentID any) (err error) {
	ctx, op := r.start(ctx, "Rebuild")
	defer op.Finish(&err)
	if err := patterns.ValidateID(parentID); err != nil {
		return fail("Rebuild", fmt.Errorf("parent id: %w", err))
	}
	p, err := r.plan(ctx)
	if err == nil {
		err = r.rebuild(ctx, p, parentID)
	}
	if err != nil {
		return fail("Rebuild", fmt.Errorf("parent %s: %w", idOf(parentID), err))
	}
	return nil
}

func (r *Repo[P, I]) rebuild(ctx context.Context, p plan, parentID any) error {
	st, err := r.readParent(ctx, p, r.cmd.parent(parentID))
	if err != nil {
		return err
	}
	return r.recompute(ctx, p, parentID, st, true, 0)
}

// RebuildAll runs [Repo.Rebuild] on every parent, in _id order, and calls
// progress (when not nil) with the number rebuilt so far after each. It
// returns that number. It reads the parents' ids in pages of 100
// (package keyset: {_id: {$gt: last}} and the types sorted after it,
// sorted by _id, one find each, and after a short page that is not the
// first one find of the greatest _id, to reach the types sorted after
// timestamps), not with one cursor, so that a parent rewritten while it
// runs (by the rebuild itself, or by others) is rebuilt once, and sends
// three commands per parent, four for a parent it stamps (one no
// recomputation has written yet: see [Repo.Rebuild]). Every parent stored before it starts is
// reached, whatever its _id (a NaN, a symbol, MinKey, MaxKey,
// JavaScript...). A parent deleted while it runs is skipped; one added may
// or may not be rebuilt. It stops at the first error, which names the
// parent: run it again to resume (rebuilding is idempotent). A parent
// whose _id no scan can page past (a regular expression, undefined: no
// MongoDB stores them as an _id) stops it with an error wrapping
// patterns.ErrInvalid that names it, when it ends a page.
func (r *Repo[P, I]) RebuildAll(ctx context.Context, progress func(rebuilt int)) (_ int, err error) {
	ctx, op := r.start(ctx, "RebuildAll")
	defer op.Finish(&err)
	p, err := r.plan(ctx)
	if err != nil {
		return 0, fail("RebuildAll", err)
	}
	n := 0
	for page, err := range keyset.Pages(ctx, r.parents, nil, parentsPageSize, 0, r.cmd.idsOnly()) {
		if err != nil {
			return n, fail("RebuildAll", err)
		}
		for _, d := range page {
			id := d.Lookup("_id")
			err := r.rebuild(ctx, p, id)
			if errors.Is(err, patterns.ErrNotFound) {
				continue
			}
			if err != nil {
				return n, fail("RebuildAll", fmt.Errorf("parent %s: %w", bsonid.Text(id), err))
			}
			n++
			if progress != nil {
				progress(n)
			}
		}
	}
	return n, nil
}
