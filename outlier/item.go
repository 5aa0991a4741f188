package outlier

import (
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// item is one item encoded once for every write it takes part in.
type item struct {
	raw bson.Raw      // the encoded item
	id  bson.RawValue // its IDField field
	key string        // bsonid.Key(id): equal for ids the server finds equal
}

// elementSize is what appending a value of size n at index i adds to a
// BSON document: the type byte, the index as a NUL-terminated decimal key,
// and the value.
func elementSize(i, n int) int { return 1 + len(strconv.Itoa(i)) + 1 + n }

// encodeItems encodes items and checks them before anything is written:
// each must encode as a document with a valid IDField field, ids must be
// distinct, and each must fit in an empty overflow document of size budget
// (an item that fits nowhere is [patterns.ErrTooLarge]).
func (r *Repo[P, I]) encodeItems(items []I, budget int) ([]item, error) {
	out := make([]item, len(items))
	seen := make(map[string]int, len(items))
	for i, it := range items {
		raw, err := bson.Marshal(it)
		if err != nil {
			return nil, errs.Invalid("item %d: cannot encode %T as a document: %v", i, it, err)
		}
		e, err := r.itemOf(raw)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if j, dup := seen[e.key]; dup {
			return nil, errs.Invalid("items %d and %d have the same %s %s", j, i, r.cfg.IDField, e.id)
		}
		seen[e.key] = i
		if size := elementSize(r.cfg.OverflowCap-1, len(raw)); size > budget {
			return nil, errs.TooLarge("item %d (%s %s) encodes to %d bytes; an overflow document has room for %d bytes of items, so no document can hold it",
				i, r.cfg.IDField, e.id, len(raw), budget-(size-len(raw)))
		}
		out[i] = e
	}
	return out, nil
}

// itemOf reads and validates the id of an encoded item.
func (r *Repo[P, I]) itemOf(raw bson.Raw) (item, error) {
	id, err := raw.LookupErr(r.cfg.IDField)
	if err != nil {
		return item{}, errs.Invalid("item has no %q field", r.cfg.IDField)
	}
	var v any
	if err := id.Unmarshal(&v); err != nil {
		return item{}, errs.Invalid("item %s: %v", r.cfg.IDField, err)
	}
	if err := patterns.ValidateID(v); err != nil {
		return item{}, fmt.Errorf("item %s: %w", r.cfg.IDField, err)
	}
	return item{raw: raw, id: id, key: bsonid.Key(id)}, nil
}

// overflowBudget is how many bytes of array elements an overflow document
// of the parent can hold: the maximum document size less the fixed fields
// ({_id, parent, seq, count, bytes, items: []}, with int64 numbers, whose
// encoded size does not change as they grow).
func overflowBudget(parentID any) (int, error) {
	env, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.ObjectID{}},
		{Key: fParent, Value: parentID},
		{Key: fSeq, Value: int64(math.MaxInt64)},
		{Key: fCount, Value: int64(0)},
		{Key: fBytes, Value: int64(0)},
		{Key: fItems, Value: bson.A{}},
	})
	if err != nil {
		return 0, errs.Invalid("parent id %v cannot be encoded: %v", parentID, err)
	}
	return patterns.MaxDocumentSize - len(env), nil
}

// without returns the items whose keys are not in present, keeping order.
func without(items []item, present map[string]bool) []item {
	if len(present) == 0 {
		return items
	}
	out := items[:0:0]
	for _, it := range items {
		if !present[it.key] {
			out = append(out, it)
		}
	}
	return out
}

// ids returns the ids of items, for $in and $nin.
func ids(items []item) bson.A {
	out := make(bson.A, len(items))
	for i, it := range items {
		out[i] = it.id
	}
	return out
}

// raws returns the encoded items, for $push $each.
func raws(items []item) bson.A {
	out := make(bson.A, len(items))
	for i, it := range items {
		out[i] = it.raw
	}
	return out
}
