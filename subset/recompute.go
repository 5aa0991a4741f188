package subset

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// parentState is what a recomputation reads from a parent: the revision
// and the ids in the subset.
type parentState struct {
	rev    int64
	hasRev bool // false while no write has gone through the repository
	ids    []bson.RawValue
}

// holds reports whether the subset holds the item with the given id.
func (s parentState) holds(id bson.RawValue) bool { return slices.ContainsFunc(s.ids, id.Equal) }

// readParent reads the revision and the subset's ids of the parent (one
// findOne projected to those fields); extra narrows the filter. No match
// gives patterns.ErrNotFound.
func (r *Repo[P, I]) readParent(ctx context.Context, parentID any, extra ...bson.E) (parentState, error) {
	var st parentState
	filter := append(bson.D{{Key: "_id", Value: parentID}}, extra...)
	proj := options.FindOne().SetProjection(bson.D{{Key: r.cfg.RevisionField, Value: 1}, {Key: r.idPath, Value: 1}})
	raw, err := r.parents.FindOne(ctx, filter, proj).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return st, fmt.Errorf("no such parent: %w", patterns.ErrNotFound)
	}
	if err != nil {
		return st, fmt.Errorf("read parent %v: %w", parentID, err)
	}
	if v, err := raw.LookupErr(r.cfg.RevisionField); err == nil {
		n, ok := v.AsInt64OK()
		if !ok {
			return st, fmt.Errorf("parent %v: %s holds a %s, not a revision number", parentID, r.cfg.RevisionField, v.Type)
		}
		st.rev, st.hasRev = n, true
	}
	if arr, ok := raw.Lookup(r.cfg.Field).ArrayOK(); ok {
		vals, err := arr.Values()
		if err != nil {
			return st, fmt.Errorf("parent %v: %s: %w", parentID, r.cfg.Field, err)
		}
		for _, v := range vals {
			if doc, ok := v.DocumentOK(); ok {
				if id, err := doc.LookupErr(r.cfg.IDField); err == nil {
					st.ids = append(st.ids, id)
				}
			}
		}
	}
	return st, nil
}

// top reads the parent's first Cap items in the configured order: one
// find on the index of Indexes, in a single batch.
func (r *Repo[P, I]) top(ctx context.Context, parentID any) ([]bson.Raw, error) {
	cur, err := r.items.Find(ctx, bson.D{{Key: r.cfg.ParentField, Value: parentID}}, r.firstN(r.cfg.Cap))
	if err != nil {
		return nil, fmt.Errorf("read the first %d items: %w", r.cfg.Cap, err)
	}
	docs := []bson.Raw{}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read the first %d items: %w", r.cfg.Cap, err)
	}
	return docs, nil
}

// firstN returns the options of a find that reads the first n items in
// the configured order in one round trip: a batch one larger than the
// limit lets the server close the cursor in its first reply (FerretDB
// keeps it open, and the driver sends a getMore, when they are equal).
func (r *Repo[P, I]) firstN(n int) *options.FindOptionsBuilder {
	return options.Find().SetSort(r.order).SetLimit(int64(n)).SetBatchSize(int32(n + 1))
}

// setUpdate builds the compare-and-set of a recomputation: the filter
// matches the parent only at the revision st was read at, and the update
// sets the subset and increments the revision.
func (r *Repo[P, I]) setUpdate(parentID any, st parentState, top []bson.Raw) (filter, update bson.D) {
	rev := bson.E{Key: r.cfg.RevisionField, Value: st.rev}
	if !st.hasRev {
		rev.Value = bson.D{{Key: "$exists", Value: false}}
	}
	if top == nil {
		top = []bson.Raw{} // an empty array, not null
	}
	filter = bson.D{{Key: "_id", Value: parentID}, rev}
	update = bson.D{
		{Key: "$set", Value: bson.D{{Key: r.cfg.Field, Value: top}}},
		{Key: "$inc", Value: bson.D{{Key: r.cfg.RevisionField, Value: int64(1)}}},
	}
	return filter, update
}

// recompute sets the parent's subset to the first Cap items of the items
// collection, with a compare-and-set on the revision; st is the parent as
// read before, and fresh says whether st was read after the change the
// caller made to the items. Each attempt sends a find and an update; a
// lost race adds a readParent. It returns patterns.ErrNotFound when the
// parent is gone, patterns.ErrConflict after maxAttempts lost races.
//
// On the portable path every write to a subset is a recomputation, and
// the loop stops as soon as one that must have seen the change has
// succeeded: once the revision has moved two past the first value read
// after the change. The write that made it floor+2 started from floor+1,
// written after that read, so it read the items after the change. So a
// caller makes at most two attempts after a fresh read, however many
// writers compete. On the native path pushes also move the revision
// without reading the items, so the loop retries until its own write
// succeeds.
func (r *Repo[P, I]) recompute(ctx context.Context, parentID any, st parentState, fresh bool) error {
	native, err := r.native(ctx)
	if err != nil {
		return err
	}
	floor := int64(-1) // the first revision read after the change
	if fresh {
		floor = st.rev
	}
	for attempt := 1; ; attempt++ {
		top, err := r.top(ctx, parentID)
		if err != nil {
			return err
		}
		filter, update := r.setUpdate(parentID, st, top)
		res, err := r.parents.UpdateOne(ctx, filter, update)
		if err != nil {
			return fmt.Errorf("set the subset: %w", err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%w: the subset of parent %v changed under %d recomputations; call Rebuild", patterns.ErrConflict, parentID, attempt)
		}
		if st, err = r.readParent(ctx, parentID); err != nil {
			return err
		}
		switch {
		case floor < 0:
			floor = st.rev
		case !native && st.rev >= floor+2:
			return nil
		}
	}
}

// Remove deletes one item of the parent from the items collection, then
// recomputes the subset from the items collection, so that when the item
// leaves a full subset the next most relevant item takes its place. It
// sends four commands: deleteOne, a read of the parent's revision, a find
// of the first Cap items and the compare-and-set of the subset (on a lost
// race, a read, a find and an update more; see the package documentation).
// Between the delete and the set, a reader of the subset may still see the
// item.
//
// It is safe to retry: when the item is no longer stored but the subset
// still holds it (an earlier Remove failed after its delete), Remove
// finishes that job. It returns [patterns.ErrNotFound] when the item is in
// neither place (or the parent does not exist). It takes the same path on
// every server.
//
// An Add of the same item running concurrently with its Remove may leave
// the item in the subset only: a [Repo.Rebuild] repairs it.
func (r *Repo[P, I]) Remove(ctx context.Context, parentID, itemID any) error {
	if err := patterns.ValidateID(parentID); err != nil {
		return fmt.Errorf("subset: Remove: parent id: %w", err)
	}
	if err := patterns.ValidateID(itemID); err != nil {
		return fmt.Errorf("subset: Remove: item id: %w", err)
	}
	res, err := r.items.DeleteOne(ctx, bson.D{{Key: r.cfg.ParentField, Value: parentID}, {Key: r.cfg.IDField, Value: itemID}})
	if err != nil {
		return fmt.Errorf("subset: Remove item %v of parent %v: %w", itemID, parentID, err)
	}
	var st parentState
	if res.DeletedCount == 1 {
		st, err = r.readParent(ctx, parentID)
	} else {
		st, err = r.readParent(ctx, parentID, bson.E{Key: r.idPath, Value: itemID})
		if errors.Is(err, patterns.ErrNotFound) {
			return fmt.Errorf("subset: Remove: item %v of parent %v: %w", itemID, parentID, patterns.ErrNotFound)
		}
	}
	if err == nil {
		err = r.recompute(ctx, parentID, st, true)
	}
	if err != nil && !errors.Is(err, patterns.ErrNotFound) { // no parent: no subset to fix
		return fmt.Errorf("subset: Remove item %v of parent %v: %w", itemID, parentID, err)
	}
	return nil
}

// Update replaces one item of the parent (the item with the same id) in
// the items collection, then recomputes the subset from the items
// collection, so that an item whose sort value changed enters, moves in or
// leaves the subset. It sends four commands, like [Repo.Remove], and a
// reader may see the old version in the subset until the last one. It is
// safe to retry. The item is validated like one given to [Repo.Add]
// ([patterns.ErrInvalid], [patterns.ErrTooLarge], nothing written); a
// missing item or parent gives [patterns.ErrNotFound]. It takes the same
// path on every server.
func (r *Repo[P, I]) Update(ctx context.Context, parentID any, item I) error {
	parent, err := newParentRef(r.cfg.ParentField, parentID)
	if err != nil {
		return fmt.Errorf("subset: Update: %w", err)
	}
	e, err := r.encode(item, parent, false)
	if err != nil {
		return fmt.Errorf("subset: Update item of parent %v: %w", parentID, err)
	}
	res, err := r.items.ReplaceOne(ctx, bson.D{{Key: r.cfg.ParentField, Value: parentID}, {Key: r.cfg.IDField, Value: e.id}}, e.doc)
	if err != nil {
		return fmt.Errorf("subset: Update item %s of parent %v: %w", e.id, parentID, err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("subset: Update: item %s of parent %v: %w", e.id, parentID, patterns.ErrNotFound)
	}
	if err := r.rebuild(ctx, parentID); err != nil {
		return fmt.Errorf("subset: Update item %s of parent %v: %w", e.id, parentID, err)
	}
	return nil
}

// Rebuild recomputes the parent's subset from the items collection: to
// repair it, to fill it for parents whose items were loaded without the
// repository, or to apply a new Cap. It sends three commands (a read of
// the revision, a find of the first Cap items, the compare-and-set), more
// on a lost race, and writes the subset in one atomic update, so a reader
// sees the old subset or the new one. A missing parent gives
// [patterns.ErrNotFound]. It takes the same path on every server.
func (r *Repo[P, I]) Rebuild(ctx context.Context, parentID any) error {
	if err := patterns.ValidateID(parentID); err != nil {
		return fmt.Errorf("subset: Rebuild: parent id: %w", err)
	}
	if err := r.rebuild(ctx, parentID); err != nil {
		return fmt.Errorf("subset: Rebuild parent %v: %w", parentID, err)
	}
	return nil
}

func (r *Repo[P, I]) rebuild(ctx context.Context, parentID any) error {
	st, err := r.readParent(ctx, parentID)
	if err != nil {
		return err
	}
	return r.recompute(ctx, parentID, st, true)
}

// RebuildAll runs [Repo.Rebuild] on every parent, in _id order, and calls
// progress (when not nil) with the number rebuilt so far after each. It
// returns that number. It reads the parents' ids with one cursor (a find
// and a getMore per batch) and sends three commands per parent; a parent
// deleted while it runs is skipped. It stops at the first error, which
// names the parent: run it again to resume (rebuilding is idempotent).
func (r *Repo[P, I]) RebuildAll(ctx context.Context, progress func(rebuilt int)) (int, error) {
	opts := options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetSort(bson.D{{Key: "_id", Value: 1}})
	cur, err := r.parents.Find(ctx, bson.D{}, opts)
	if err != nil {
		return 0, fmt.Errorf("subset: RebuildAll: %w", err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	n := 0
	for cur.Next(ctx) {
		id := cur.Current.Lookup("_id")
		err := r.rebuild(ctx, id)
		if errors.Is(err, patterns.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("subset: RebuildAll: parent %s: %w", id, err)
		}
		n++
		if progress != nil {
			progress(n)
		}
	}
	if err := cur.Err(); err != nil {
		return n, fmt.Errorf("subset: RebuildAll: %w", err)
	}
	return n, nil
}
