package outlier

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Update replaces the item that has item's id (its IDField) with item,
// wherever it lives: the parent's array or an overflow document. The item
// keeps its place in the append order; nothing moves.
//
// Cost where the server has [patterns.FeatureArrayFilters] and refuses
// updates past 16 MiB (MongoDB, FerretDB 2.x): 1 command for an item in
// the parent (an update by its id, {$set: {<Field>.$[e]: item}}, every
// element holding the id, of the parent while it holds the id or its
// flag is true and holds no element equal to item), 3 for one in
// overflow (that update, matching the parent by its flag and changing
// nothing; a findOne of the overflow document holding the id, by the
// {parent, items.<IDField>} index; and the update of that document,
// named by parent and seq, replacing the element read by its value:
// every element equal to it, wherever it is by then). Where that
// update matches nothing (the item stored as given, an open parent
// without the id, a closed one whose array is empty, no parent) a findOne
// of the parent follows, and Update
// goes on as below from what it read, writing by value: 2 commands. Elsewhere
// the parent is read first: 2 commands for an item in the parent (the
// findOne, then an update setting the element by its index), 3 for one
// in overflow (the findOne, then the holder's findOne and its update, by
// index); where the server does not
// refuse updates past 16 MiB ([patterns.FeatureUpdateSizeLimit]: FerretDB
// 1.x) the parent is read whole, to check its size, and the repository
// runs its Updates and Appends of one parent one at a time, as Append
// does. An item stored already as given is written nothing: it costs the
// commands up to the read that finds it so (on the native path, the update
// that matches nothing and the findOne of the parent). An id that
// no overflow document of an overflowed parent holds costs a findOne of
// the parent more, to say whether the parent exists.
//
// Only a parent whose flag is true has overflow: overflow documents with
// the id of a parent whose flag is false are a deleted parent's (left by
// a [Repo.Delete] that failed between its two deletes, before the parent
// was inserted again): Update looks in overflow only after it read the
// flag true, and an item held only there is [patterns.ErrNotFound].
//
// Each write is atomic. Those that replace the element read are guarded
// on it (and, in an overflow document, on the room its bytes leave): a
// concurrent Update of the item, or a Remove of it, makes the write match
// nothing, and Update reads again (after 100 misses in a row,
// [patterns.ErrConflict]). Where the server has
// [patterns.FeatureArrayFilters], the write names the element by its
// value, compared whole, so a concurrent Remove or Append of other items
// changes nothing of it. Elsewhere it names the element by its index and
// is also guarded on the size of the array read ($size): a concurrent
// Remove, which shifts the elements, or Append, which changes the size
// checked, makes it match nothing too. The element is guarded there by its
// path, Field.<i>, which MongoDB also reads as the field named i of any
// element (and, if that field holds a list, as any element of the list):
// the guard could match after concurrent writes shifted the elements only
// if both a Remove and an Append ran between the read and the write, in
// that array, and another item held, under a field named by that index, a
// copy of the element read (a whole item, id included) or a list with
// one. A reader sees the old item or the new one. Two Updates of one item leave one of the two, whole. Update is
// retry-safe: after a failure (a lost connection, a timeout), calling it
// again finds the item as given and sends nothing more; the failed call
// replaced it or not. It is also sent again after a transient failure
// that applied nothing (FerretDB 2.x's deadlock).
//
// The size rules hold: an item that no overflow document could hold is
// [patterns.ErrTooLarge] before anything is sent, as for Append; so is an
// item that would take the parent past 16 MiB (the server refuses the
// update, or Update counts the parent's size where it does not) or an
// overflow document past the bytes it may hold (its bytes, which Remove
// does not lower, bound its items' size from above). The stored data is
// then untouched. A bad parent id or item is [patterns.ErrInvalid]; an id
// held by no item of the parent, or a missing parent, is
// [patterns.ErrNotFound].
func (r *Repo[P, I]) Update(ctx context.Context, parentID any, item I) (err error) {
	ctx, op := r.start(ctx, "Update")
	defer op.Finish(&err)
	if err := validParent("Update", parentID); err != nil {
		return err
	}
	return fail("Update", parentID, r.update(ctx, parentID, item))
}

func (r *Repo[P, I]) update(ctx context.Context, parentID any, in I) error {
	pid, err := encodeID(parentID) // valid: checked by Update
	if err != nil {
		return err
	}
	budget := overflowBudget(pid)
	its, err := r.encodeItems([]I{in}, budget)
	if err != nil {
		return err
	}
	it := its[0]
	p, err := r.plan(ctx)
	if err != nil {
		return err
	}
	key, held, err := r.lockParent(ctx, p, pid)
	if err != nil {
		return err
	}
	if held != nil {
		defer r.appending.unlock(key, held)
	}
	for range maxMisses {
		done, err := r.updateOnce(ctx, p, parentID, it, budget)
		if err != nil || done {
			return err
		}
		patterns.OperationFrom(ctx).Lost()
	}
	return fmt.Errorf("%d updates of item %s in a row lost to concurrent writers: %w", maxMisses, bsonid.Text(it.id), patterns.ErrConflict)
}

// updateOnce reads where the item is and replaces it there; false when
// the guarded write matched nothing (a concurrent write changed what it
// read).
func (r *Repo[P, I]) updateOnce(ctx context.Context, p plan, parentID any, it item, budget int) (bool, error) {
	if p.arrayFilters {
		filter, update, af := r.updateParentNative(parentID, it)
		res, err := updateOne(ctx, r.parents, filter, update, options.UpdateOne().SetArrayFilters(af))
		switch {
		case srverr.TooLarge(err):
			return false, parentTooLarge(it, err)
		case err != nil:
			return false, err
		case res.ModifiedCount == 1:
			return true, nil
		case res.MatchedCount == 1: // matched by the flag: not in the parent
			return r.updateOverflow(ctx, p, parentID, it, budget)
		}
		// No parent, the item stored as given, or an open parent without
		// it: read the parent to tell which, as below.
	}
	raw, err := r.findParent(ctx, parentID, r.updateProjection(p))
	if err != nil {
		return false, err
	}
	st, err := r.stateOf(p, raw)
	if err != nil {
		return false, err
	}
	if i, old := r.find(st.items, it); i >= 0 {
		if bytes.Equal(old.Value, it.raw) {
			return true, nil
		}
		delta := len(it.raw) - len(old.Value)
		if st.size >= 0 && st.size+delta > patterns.MaxDocumentSize {
			return false, errs.TooLarge("item %s encodes to %d bytes; the parent would be %d bytes, over %d", bsonid.Text(it.id), len(it.raw), st.size+delta, patterns.MaxDocumentSize)
		}
		update, af := r.updateParentUpdate(p, i, old, it)
		res, err := updateOne(ctx, r.parents, r.updateParentFilter(p, parentID, i, old, len(st.items)), update, withArrayFilters(af))
		if srverr.TooLarge(err) {
			return false, parentTooLarge(it, err)
		}
		return err == nil && res.MatchedCount == 1, err
	}
	if st.open {
		return false, r.noItem(it)
	}
	return r.updateOverflow(ctx, p, parentID, it, budget)
}

// updateOverflow replaces the item in the overflow document holding it,
// read first; false when the guarded write matched nothing.
func (r *Repo[P, I]) updateOverflow(ctx context.Context, p plan, parentID any, it item, budget int) (bool, error) {
	patterns.OperationFrom(ctx).Sent(1)
	holder, err := r.overflow.FindOne(ctx, r.holderFilter(parentID, it.id), options.FindOne().SetProjection(holderUpdateProjection)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		// Say which is missing, the parent or the item: a read on the
		// error path only.
		if _, err := r.findParent(ctx, parentID, r.countProjection()); err != nil {
			return false, err
		}
		return false, r.noItem(it)
	}
	if err != nil {
		return false, err
	}
	var doc struct {
		Seq   int64 `bson:"seq"`
		Bytes int   `bson:"bytes"`
	}
	if err := bson.Unmarshal(holder, &doc); err != nil {
		return false, err
	}
	items, ok := holder.Lookup(fItems).ArrayOK()
	if !ok {
		return false, fmt.Errorf("overflow document %d has no items array", doc.Seq)
	}
	vals, err := items.Values()
	if err != nil {
		return false, err
	}
	i, old := r.find(vals, it)
	if i < 0 {
		return false, nil // removed since the find: read again
	}
	if bytes.Equal(old.Value, it.raw) {
		return true, nil
	}
	delta := len(it.raw) - len(old.Value)
	if delta > 0 && doc.Bytes+delta > budget {
		return false, errs.TooLarge("item %s encodes to %d bytes; overflow document %d has room for %d more bytes of items", bsonid.Text(it.id), len(it.raw), doc.Seq, max(budget-doc.Bytes, 0))
	}
	update, af := updateOverflowUpdate(p, i, old, it, delta)
	res, err := updateOne(ctx, r.overflow, updateOverflowFilter(p, parentID, doc.Seq, i, len(vals), old, delta, budget), update, withArrayFilters(af))
	return err == nil && res.MatchedCount == 1, err
}

// withArrayFilters is the option of an update with the arrayFilters
// given, if any: none on the plans that set an element by its index,
// whose servers may lack [patterns.FeatureArrayFilters].
func withArrayFilters(af []any) *options.UpdateOneOptionsBuilder {
	o := options.UpdateOne()
	if af != nil {
		o.SetArrayFilters(af)
	}
	return o
}

// find returns the index and the value of the first element of vals
// whose id is the item's, or -1.
func (r *Repo[P, I]) find(vals []bson.RawValue, it item) (int, bson.RawValue) {
	for i, v := range vals {
		if doc, ok := v.DocumentOK(); ok {
			if id, err := doc.LookupErr(r.cfg.IDField); err == nil && bsonid.Equal(id, it.id) {
				return i, v
			}
		}
	}
	return -1, bson.RawValue{}
}

// parentTooLarge is the error of an Update whose write the server
// refused because the parent would pass 16 MiB.
func parentTooLarge(it item, err error) error {
	return errs.TooLarge("item %s encodes to %d bytes: the server refused the parent past 16 MiB: %v", bsonid.Text(it.id), len(it.raw), err)
}

// noItem is the error of an Update of an item the parent does not hold.
func (r *Repo[P, I]) noItem(it item) error {
	return fmt.Errorf("item %s: no such item: %w", bsonid.Text(it.id), patterns.ErrNotFound)
}
