package subset

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Count returns the number of the parent's items. With Config.CountField
// it reads that field: one findOne on the parents, served by _id, and a
// missing parent gives [patterns.ErrNotFound], a count field that is not
// a whole number from 0 to 2^63-1 (of any numeric type: the int32 3, the
// double 3.0 and the decimal 3.00 are 3; 2.9, NaN, -5 and a string are
// not) [patterns.ErrInvalid]. A parent that has no count
// yet (none of the repository's writes has reached it since it was
// created, or its items were loaded without the repository) gets one
// first, as [Repo.Rebuild] sets it (its commands, four without a lost
// race, and its errors), and Count returns the count as then stored,
// read with the findOne again: once per parent. Without CountField it
// counts the parent's items: one aggregate on the items collection,
// served by the index of [Repo.Indexes], that reads every index entry of
// the parent; a parent with no items, or none at all, gives 0. It takes the same path on
// every server.
//
// The count field lags the items collection as the subset does (see
// [Repo.Get]): by the writes in flight, and no more; and while no item is
// removed, the counts that successive calls return never go down. (A
// count of the items collection for a parent without the field would run
// ahead of the count that a first Add in flight then stores, counted
// before another Add's item arrived: hence the write.)
func (r *Repo[P, I]) Count(ctx context.Context, parentID any) (_ int64, err error) {
	ctx, op := r.start(ctx, "Count")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return 0, fail("Count", err)
	}
	if err := patterns.ValidateID(parentID); err != nil {
		return 0, fail("Count", fmt.Errorf("parent id: %w", err))
	}
	n, err := r.count(ctx, parentID)
	if err != nil {
		return 0, fail("Count", fmt.Errorf("parent %s: %w", idOf(parentID), err))
	}
	return n, nil
}

func (r *Repo[P, I]) count(ctx context.Context, parentID any) (int64, error) {
	op := patterns.OperationFrom(ctx)
	if r.cfg.CountField == "" {
		op.Sent(1)
		return r.items.CountDocuments(ctx, r.cmd.items(parentID))
	}
	for set := false; ; set = true {
		op.Sent(1)
		raw, err := r.parents.FindOne(ctx, r.cmd.parent(parentID), options.FindOne().SetProjection(r.cmd.countProjection())).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return 0, errNoParent
		}
		if err != nil {
			return 0, err
		}
		v, err := raw.LookupErr(r.cfg.CountField)
		if err == nil {
			return countOf(r.cfg.CountField, v)
		}
		if set {
			op.Lost() // a concurrent writer removed the count it set
			return 0, fmt.Errorf("the parent's %s was removed as it was set: %w", r.cfg.CountField, patterns.ErrConflict)
		}
		// No count yet: set it with the subset, in the chain of
		// compare-and-sets whose counts never go back, then read it.
		p, err := r.plan(ctx)
		if err != nil {
			return 0, err
		}
		if err := r.rebuild(ctx, p, parentID); err != nil {
			return 0, fmt.Errorf("set the count: %w", err)
		}
	}
}

// countOf reads the count field's value v: a whole number from 0 to
// MaxInt64, of any numeric type (int32, int64, double, decimal128); any
// other value gives patterns.ErrInvalid.
func countOf(field string, v bson.RawValue) (int64, error) {
	if _, isNumber := bsonid.Number(v); !isNumber {
		return 0, fmt.Errorf("the parent's %s holds a %s, not a count: %w", field, v.Type, patterns.ErrInvalid)
	}
	n, ok := bsonid.Int(v)
	if !ok || n < 0 {
		return 0, fmt.Errorf("the parent's %s holds the %s %s, not a count (a whole number from 0 to 2^63-1): %w", field, v.Type, bsonid.Text(v), patterns.ErrInvalid)
	}
	return n, nil
}

// Item returns one item of the parent, by its id, from the items
// collection: one findOne, served by the index of [Repo.Indexes] (by _id
// when IDField is _id). An item that is not the parent's, or not stored,
// gives [patterns.ErrNotFound]; an invalid id gives
// [patterns.ErrInvalid]. It takes the same path on every server, and sees
// an item as soon as [Repo.Add]'s first step has stored it.
func (r *Repo[P, I]) Item(ctx context.Context, parentID, itemID any) (_ I, err error) {
	ctx, op := r.start(ctx, "Item")
	defer op.Finish(&err)
	var it I
	if err := txn.Refuse(ctx); err != nil {
		return it, fail("Item", err)
	}
	if err := patterns.ValidateID(parentID); err != nil {
		return it, fail("Item", fmt.Errorf("parent id: %w", err))
	}
	if err := patterns.ValidateID(itemID); err != nil {
		return it, fail("Item", fmt.Errorf("parent %s: item id: %w", idOf(parentID), err))
	}
	op.Sent(1)
	err = r.items.FindOne(ctx, r.cmd.item(parentID, itemID)).Decode(&it)
	if errors.Is(err, mongo.ErrNoDocuments) {
		err = fmt.Errorf("no such item: %w", patterns.ErrNotFound)
	}
	if err != nil {
		var zero I
		return zero, fail("Item", fmt.Errorf("parent %s: item %s: %w", idOf(parentID), idOf(itemID), err))
	}
	return it, nil
}
