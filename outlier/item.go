package outlier

import (
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// item is one item encoded once for every write it takes part in.
type item struct {
	raw bson.Raw      // the encoded item
	id  bson.RawValue // its IDField field
	key string        // bsonid.Key(id), equal for ids the server finds equal; "" until idKey
}

// idKey returns bsonid.Key(it.id), computing it on first use (a single
// item pushed into its parent never needs it).
func (it *item) idKey() string {
	if it.key == "" {
		it.key = bsonid.Key(it.id)
	}
	return it.key
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
	var seen map[string]int // keys of the ids, when there are several
	if len(items) > 1 {
		seen = make(map[string]int, len(items))
	}
	for i, it := range items {
		raw, err := bson.Marshal(it)
		if err != nil {
			return nil, errs.Invalid("item %d: cannot encode %T as a document: %v", i, it, err)
		}
		e, err := r.itemOf(raw)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if seen != nil {
			if j, dup := seen[e.idKey()]; dup {
				return nil, errs.Invalid("items %d and %d have the same %s %s", j, i, r.cfg.IDField, bsonid.Text(e.id))
			}
			seen[e.key] = i
		}
		if size := elementSize(r.cfg.OverflowCap-1, len(raw)); size > budget {
			return nil, errs.TooLarge("item %d (%s %s) encodes to %d bytes; an overflow document has room for %d bytes of items, so no document can hold it",
				i, r.cfg.IDField, bsonid.Text(e.id), len(raw), budget-(size-len(raw)))
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
	if err := validRawID(id); err != nil {
		return item{}, fmt.Errorf("item %s: %w", r.cfg.IDField, err)
	}
	return item{raw: raw, id: id}, nil
}

// validRawID checks an encoded id as [patterns.ValidateID] checks the Go
// value it decodes to.
func validRawID(id bson.RawValue) error {
	v, err := goValue(id)
	if err != nil {
		return errs.Invalid("%v", err)
	}
	return patterns.ValidateID(v)
}

// encodeID encodes an id given at the API as bson.MarshalValue does: the
// usual id types directly, which costs a fraction of the encoder's
// allocations, the others through it.
func encodeID(id any) (bson.RawValue, error) {
	switch v := id.(type) {
	case string:
		return bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, v)}, nil
	case bson.ObjectID:
		return bson.RawValue{Type: bson.TypeObjectID, Value: bsoncore.AppendObjectID(nil, v)}, nil
	case int32:
		return bson.RawValue{Type: bson.TypeInt32, Value: bsoncore.AppendInt32(nil, v)}, nil
	case int64:
		return bson.RawValue{Type: bson.TypeInt64, Value: bsoncore.AppendInt64(nil, v)}, nil
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 { // as the encoder writes an int
			return bson.RawValue{Type: bson.TypeInt32, Value: bsoncore.AppendInt32(nil, int32(v))}, nil
		}
		return bson.RawValue{Type: bson.TypeInt64, Value: bsoncore.AppendInt64(nil, int64(v))}, nil
	}
	t, data, err := bson.MarshalValue(id)
	return bson.RawValue{Type: t, Value: data}, err
}

// goValue decodes an id into the Go value that decoding it into an any
// gives, for [patterns.ValidateID]: the usual id types directly, which
// costs a fraction of the decoder's allocations, the others through it.
func goValue(id bson.RawValue) (any, error) {
	switch id.Type {
	case bson.TypeString:
		if s, ok := id.StringValueOK(); ok {
			return s, nil
		}
	case bson.TypeObjectID:
		if o, ok := id.ObjectIDOK(); ok {
			return o, nil
		}
	case bson.TypeInt32:
		if n, ok := id.Int32OK(); ok {
			return n, nil
		}
	case bson.TypeInt64:
		if n, ok := id.Int64OK(); ok {
			return n, nil
		}
	}
	var v any
	err := id.Unmarshal(&v)
	return v, err
}

// overflowBudget is how many bytes of array elements an overflow document
// of the parent can hold: the maximum document size less the fixed fields
// ({_id, parent, seq, count, bytes, items: []}, with int64 numbers, whose
// encoded size does not change as they grow). The parent id is counted at
// its widest encoding (see widest), since the documents may have been
// created through another type of the same id (7, int64(7) and 7.0 are
// one parent, of 4, 8 and 8 bytes, and so are {k: 7} and {k: 7.0}).
func overflowBudget(parentID bson.RawValue) int {
	n := widest(parentID)
	elem := func(key string, n int) int { return 1 + len(key) + 1 + n } // type, name, NUL, value
	env := 4 +                                                          // length
		elem("_id", 12) + // the ObjectID the upsert generates
		elem(fParent, n) +
		elem(fSeq, 8) + elem(fCount, 8) + elem(fBytes, 8) +
		elem(fItems, 5) + // an empty array
		1 // terminator
	return patterns.MaxDocumentSize - env
}

// widest is the size of v's widest encoding among the values the server
// finds equal to it: every number, alone or at any depth inside a
// document or an array, counted as a decimal128 (16 bytes); everything
// else as it is given.
func widest(v bson.RawValue) int {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return 16
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		n := len(v.Value)
		elems, err := bson.Raw(v.Value).Elements()
		if err != nil { // malformed: counted as given, the server refuses it
			return n
		}
		for _, e := range elems {
			ev := e.Value()
			n += widest(ev) - len(ev.Value)
		}
		return n
	}
	return len(v.Value)
}

// without returns the items whose keys are not in present, keeping order.
func without(items []item, present map[string]bool) []item {
	if len(present) == 0 {
		return items
	}
	out := items[:0:0]
	for _, it := range items {
		if !present[it.idKey()] {
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
