package subset

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxAttempts bounds the retries of a guarded $push and of a
// recomputation that keep losing to concurrent writers; past it the
// operation returns patterns.ErrConflict.
const maxAttempts = 10

// Add stores items under the parent: first in the items collection, then
// in the parent's subset, which afterwards holds the Cap most relevant of
// all the parent's items, whatever the order in which they arrive. Adding
// no items sends nothing.
//
// Native path (MongoDB): two commands. An unordered insertMany, then one
// updateOne on the parent that pushes the items with $each, $sort (the
// configured order) and $slice (Cap), and increments the revision. The
// update is guarded by {Field.IDField: {$nin: ids}}, so that it never
// pushes an item the subset already holds. A subset field that $push
// cannot extend (null, say: a nil slice stored without omitempty) is
// replaced by a recomputation, three commands more.
//
// Portable path (servers whose $push ignores $sort and $slice, such as
// FerretDB): four commands. A read of the parent's revision, the
// insertMany, and the recomputation of the subset from the items
// collection (an indexed find of the first Cap items and a compare-and-set
// of the subset on the revision; see the package documentation). The
// subset never holds more than Cap items, not even for a moment.
//
// Between the two steps a reader sees the items in the items collection
// ([Repo.All], [Repo.Page]) but not yet in the subset ([Repo.Get]).
//
// Retry-safe: after a failure at any step, calling Add again with the same
// items leaves exactly one copy of each in each place. An item whose id is
// already stored under the parent counts as added by the earlier attempt
// and keeps its stored version (Add is not an upsert: use [Repo.Update] to
// change an item). If the guarded push matches nothing because the subset
// holds some of the items already (an earlier attempt, or a concurrent
// recomputation, put them there), Add reads the subset's ids and pushes
// only the absent ones: one read and one update more.
//
// A missing parent gives [patterns.ErrNotFound] and leaves no item behind:
// the portable path checks it before inserting; the native path finds it
// when the push matches nothing and deletes the items it inserted (a
// reader may see them until then). A parent deleted concurrently is
// handled the same way; see [Repo.Delete].
//
// Bad input gives [patterns.ErrInvalid] and writes nothing: an invalid
// parent id, an item without a valid id or a scalar sort value, an item
// whose ParentField names another parent, two items with one id, an id
// stored under another parent. An item too large for a Cap-th of a
// document gives [patterns.ErrTooLarge].
func (r *Repo[P, I]) Add(ctx context.Context, parentID any, items ...I) error {
	parent, err := newParentRef(r.cfg.ParentField, parentID)
	if err != nil {
		return fmt.Errorf("subset: Add: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	entries, err := r.encodeAll(items, parent)
	if err != nil {
		return fmt.Errorf("subset: Add to parent %v: %w", parentID, err)
	}
	native, err := r.native(ctx)
	if err != nil {
		return fmt.Errorf("subset: Add: %w", err)
	}
	if native {
		err = r.addNative(ctx, parent, entries)
	} else {
		err = r.addPortable(ctx, parent, entries)
	}
	if errors.Is(err, patterns.ErrNotFound) {
		// The parent is gone: take back what this call stored.
		if _, derr := r.items.DeleteMany(ctx, r.itemsFilter(parent.id, ids(entries))); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete the items stored for the missing parent: %w", derr))
		}
	}
	if err != nil {
		return fmt.Errorf("subset: Add to parent %v: %w", parentID, err)
	}
	return nil
}

func (r *Repo[P, I]) addNative(ctx context.Context, parent parentRef, entries []entry) error {
	pending, err := r.insert(ctx, parent, entries)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		filter, update := r.pushUpdate(parent.id, pending)
		res, err := r.parents.UpdateOne(ctx, filter, update)
		if se, ok := errors.AsType[mongo.ServerError](err); ok && se.HasErrorCode(codeBadValue) {
			// The subset field holds something $push cannot extend, most
			// often null (a nil slice stored without omitempty): a
			// recomputation sets it.
			return r.rebuild(ctx, parent.id)
		}
		if err != nil {
			return fmt.Errorf("push into the subset: %w", err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
		// No parent, or the subset holds some of the items already.
		st, err := r.readParent(ctx, parent.id)
		if err != nil {
			return err
		}
		var absent []entry
		for _, e := range pending {
			if !st.holds(e.id) {
				absent = append(absent, e)
			}
		}
		pending = absent
		if len(pending) == 0 {
			return nil
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%w: the subset kept changing under %d guarded pushes; the items are stored, Add again or Rebuild", patterns.ErrConflict, attempt)
		}
	}
}

func (r *Repo[P, I]) addPortable(ctx context.Context, parent parentRef, entries []entry) error {
	st, err := r.readParent(ctx, parent.id)
	if err != nil {
		return err
	}
	if _, err := r.insert(ctx, parent, entries); err != nil {
		return err
	}
	return r.recompute(ctx, parent.id, st, false)
}

// pushUpdate builds the guarded $push of the native path: the filter
// matches the parent only while its subset holds none of the entries, and
// the update pushes them, sorts the subset in the configured order, keeps
// the first Cap and increments the revision.
func (r *Repo[P, I]) pushUpdate(parentID any, entries []entry) (filter, update bson.D) {
	docs := make(bson.A, len(entries))
	for i, e := range entries {
		docs[i] = e.doc
	}
	filter = bson.D{
		{Key: "_id", Value: parentID},
		{Key: r.idPath, Value: bson.D{{Key: "$nin", Value: ids(entries)}}},
	}
	update = bson.D{
		{Key: "$push", Value: bson.D{{Key: r.cfg.Field, Value: bson.D{
			{Key: "$each", Value: docs},
			{Key: "$sort", Value: r.order},
			{Key: "$slice", Value: r.cfg.Cap},
		}}}},
		{Key: "$inc", Value: bson.D{{Key: r.cfg.RevisionField, Value: int64(1)}}},
	}
	return filter, update
}

// insert stores the entries in the items collection with one unordered
// insertMany and returns the documents to push: the entries, except that an
// item whose id was stored under the parent already (by an earlier
// attempt, or concurrently) comes back in its stored version, read with
// one more find. When an id is taken by an item that is not the parent's,
// it deletes what it inserted and returns patterns.ErrInvalid; on any
// other write error it deletes what it inserted and returns the error.
func (r *Repo[P, I]) insert(ctx context.Context, parent parentRef, entries []entry) ([]entry, error) {
	docs := make([]bson.Raw, len(entries))
	for i, e := range entries {
		docs[i] = e.doc
	}
	_, err := r.items.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return entries, nil
	}
	bwe, ok := errors.AsType[mongo.BulkWriteException](err)
	if !ok || bwe.WriteConcernError != nil {
		return nil, fmt.Errorf("insert the items: %w", err)
	}
	failed := make([]bool, len(entries))
	var dups []bson.RawValue
	var other error
	for _, we := range bwe.WriteErrors {
		if we.Index < 0 || we.Index >= len(entries) {
			return nil, fmt.Errorf("insert the items: %w", err)
		}
		failed[we.Index] = true
		if we.Code == codeDuplicateKey {
			dups = append(dups, entries[we.Index].id)
		} else if other == nil {
			other = fmt.Errorf("insert item %s: %w", entries[we.Index].id, we)
		}
	}
	var inserted []bson.RawValue
	for i, e := range entries {
		if !failed[i] {
			inserted = append(inserted, e.id)
		}
	}
	undo := func(cause error) error {
		if len(inserted) == 0 {
			return cause
		}
		if _, err := r.items.DeleteMany(ctx, r.itemsFilter(parent.id, inserted)); err != nil {
			return errors.Join(cause, fmt.Errorf("delete the items inserted before the error: %w", err))
		}
		return cause
	}
	if other != nil {
		return nil, undo(other)
	}
	stored, err := r.storedItems(ctx, parent.id, dups)
	if err != nil {
		return nil, undo(err)
	}
	if len(stored) < len(dups) {
		var foreign []bson.RawValue
		for _, id := range dups {
			if !slices.ContainsFunc(stored, func(e entry) bool { return e.id.Equal(id) }) {
				foreign = append(foreign, id)
			}
		}
		return nil, undo(errs.Invalid("item ids %v are taken by items that are not the parent's", foreign))
	}
	out := slices.Clone(entries)
	for i := range out {
		if j := slices.IndexFunc(stored, func(e entry) bool { return e.id.Equal(out[i].id) }); j >= 0 {
			out[i] = stored[j]
		}
	}
	return out, nil
}

// Server error codes: a unique index violation, and a $push onto a field
// that is not an array.
const (
	codeDuplicateKey = 11000
	codeBadValue     = 2
)

// storedItems reads the parent's items with the given ids: one find.
func (r *Repo[P, I]) storedItems(ctx context.Context, parentID any, itemIDs []bson.RawValue) ([]entry, error) {
	cur, err := r.items.Find(ctx, r.itemsFilter(parentID, itemIDs))
	if err != nil {
		return nil, fmt.Errorf("read the stored items: %w", err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read the stored items: %w", err)
	}
	out := make([]entry, 0, len(docs))
	for _, d := range docs {
		id, err := d.LookupErr(r.cfg.IDField)
		if err != nil {
			return nil, fmt.Errorf("stored item without %s: %s", r.cfg.IDField, d)
		}
		out = append(out, entry{doc: d, id: id})
	}
	return out, nil
}

// itemsFilter matches the parent's items with the given ids.
func (r *Repo[P, I]) itemsFilter(parentID any, itemIDs []bson.RawValue) bson.D {
	return bson.D{
		{Key: r.cfg.ParentField, Value: parentID},
		{Key: r.cfg.IDField, Value: bson.D{{Key: "$in", Value: itemIDs}}},
	}
}

// ids returns the ids of the entries.
func ids(entries []entry) []bson.RawValue {
	out := make([]bson.RawValue, len(entries))
	for i, e := range entries {
		out[i] = e.id
	}
	return out
}
