package subset

import (
	"encoding/binary"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// entry is one item encoded for storage: the document that both places
// hold (the items collection and the parent's subset) and its id.
type entry struct {
	doc bson.Raw
	id  bson.RawValue
}

// parentRef is a validated parent id and its BSON encoding, which the
// encoder compares with an item's parent field or appends to it.
type parentRef struct {
	id   any
	elem []byte // the element ParentField: id
	val  bson.RawValue
}

// newParentRef validates a parent id given at the API.
func newParentRef(field string, id any) (parentRef, error) {
	t, v, err := bson.MarshalValue(id)
	val := bson.RawValue{Type: t, Value: v}
	if err != nil || !plainID(val) {
		if err := patterns.ValidateID(id); err != nil {
			return parentRef{}, fmt.Errorf("parent id: %w", err)
		}
	}
	elem := make([]byte, 0, 2+len(field)+len(v))
	elem = append(elem, byte(t))
	elem = append(elem, field...)
	elem = append(elem, 0)
	elem = append(elem, v...)
	return parentRef{id: id, elem: elem, val: val}, nil
}

// plainID reports whether v is an id of the common kinds that
// patterns.ValidateID accepts: a non-empty string, a non-zero ObjectID or
// a non-zero integer. It reads only the encoding; for every other value
// the caller asks ValidateID, which decides (and words the error), at the
// cost of encoding the id again.
func plainID(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeString:
		s, ok := v.StringValueOK()
		return ok && s != ""
	case bson.TypeObjectID:
		o, ok := v.ObjectIDOK()
		return ok && !o.IsZero()
	case bson.TypeInt32:
		i, ok := v.Int32OK()
		return ok && i != 0
	case bson.TypeInt64:
		i, ok := v.Int64OK()
		return ok && i != 0
	}
	return false
}

// String names the parent in errors: parent "kettle", parent 7.
func (p parentRef) String() string { return "parent " + bsonid.Text(p.val) }

// encode turns an item into the document both places store. It rejects,
// wrapping patterns.ErrInvalid, an item that does not encode as a
// document, has no valid id, has no scalar sort value or names another
// parent; and, wrapping patterns.ErrTooLarge, one larger than
// r.itemLimit. It appends ParentField when the item lacks it; with newID
// and an IDField other than _id, it prepends a generated _id when the
// item has none, so that the copy in the subset equals the stored
// document.
func (r *Repo[P, I]) encode(item I, parent parentRef, newID bool) (entry, error) {
	raw, err := bson.Marshal(item)
	if err != nil {
		return entry{}, errs.Invalid("item of type %T does not encode as a document: %v", item, err)
	}
	doc := bson.Raw(raw)
	id, err := doc.LookupErr(r.cfg.IDField)
	if err != nil {
		return entry{}, errs.Invalid("item has no id field %q", r.cfg.IDField)
	}
	if err := validateRawID(id); err != nil {
		return entry{}, fmt.Errorf("item field %q: %w", r.cfg.IDField, err)
	}
	sortKey, err := doc.LookupErr(r.sortPath...)
	if err != nil {
		return entry{}, errs.Invalid("item %s has no sort field %q", bsonid.Text(id), r.cfg.SortField)
	}
	if err := checkScalar(sortKey); err != nil {
		return entry{}, fmt.Errorf("item %s: sort field %q: %w", bsonid.Text(id), r.cfg.SortField, err)
	}
	p, err := doc.LookupErr(r.cfg.ParentField)
	hasParent := err == nil
	if hasParent && !bsonid.Equal(p, parent.val) {
		return entry{}, errs.Invalid("item %s: %s is %s, not the parent's id %s", bsonid.Text(id), r.cfg.ParentField, bsonid.Text(p), bsonid.Text(parent.val))
	}
	_, err = doc.LookupErr("_id")
	genID := newID && err != nil // only when IDField is not _id: an item without IDField was rejected above

	if !hasParent || genID {
		size := len(doc)
		if genID {
			size += len(idElemPrefix) + 12
		}
		if !hasParent {
			size += len(parent.elem)
		}
		out := make([]byte, 4, size)
		if genID {
			oid := bson.NewObjectID()
			out = append(out, idElemPrefix...)
			out = append(out, oid[:]...)
		}
		out = append(out, doc[4:len(doc)-1]...)
		if !hasParent {
			out = append(out, parent.elem...)
		}
		out = append(out, 0)
		binary.LittleEndian.PutUint32(out, uint32(len(out)))
		doc = out
	}
	if limit := r.itemLimit(parent); len(doc) > limit {
		return entry{}, errs.TooLarge("item %s is %d bytes; with a cap of %d, an item may take at most %d", bsonid.Text(id), len(doc), r.cfg.Cap, limit)
	}
	return entry{doc: doc, id: id}, nil
}

// idElemPrefix is the start of an ObjectID element named _id: its type
// byte and its key.
const idElemPrefix = "\x07_id\x00"

// encodeAll encodes items and rejects two items with one id (the same id
// to the server: 7 and 7.0 are one id). An error names the item by its
// place in items.
func (r *Repo[P, I]) encodeAll(items []I, parent parentRef) ([]entry, error) {
	out := make([]entry, len(items))
	var seen map[string]int // by bsonid.Key; not needed for one item
	if len(items) > 1 {
		seen = make(map[string]int, len(items))
	}
	for i, item := range items {
		e, err := r.encode(item, parent, true)
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		if seen != nil {
			k := bsonid.Key(e.id)
			if j, dup := seen[k]; dup {
				return nil, errs.Invalid("items[%d]: id %s is given twice (items[%d])", i, bsonid.Text(e.id), j)
			}
			seen[k] = i
		}
		out[i] = e
	}
	return out, nil
}

// The sizes of BSON encodings, to know what a parent document takes.

// elemSize is the size of a document element with the given key and a
// value of n bytes: its type byte, its key and the key's NUL, its value.
func elemSize(key string, n int) int { return 1 + len(key) + 1 + n }

// indexKeys is the size of the keys of an array of n elements: each
// element has a type byte, its index in decimal and a NUL.
func indexKeys(n int) int {
	size := 0
	for bound, digits := 10, 1; ; bound, digits = bound*10, digits+1 {
		low := bound / 10 // the indexes of this many digits are [low, bound)
		if digits == 1 {
			low = 0
		}
		high := min(n, bound)
		if high <= low {
			return size
		}
		size += (high - low) * (2 + digits)
	}
}

// arraySize is the size of a BSON array of docs.
func arraySize(docs []bson.Raw) int {
	size := 4 + indexKeys(len(docs)) + 1
	for _, d := range docs {
		size += len(d)
	}
	return size
}

// itemLimit is the largest item the repository stores under the parent:
// Cap items of that size fit in a parent that holds nothing else, its
// _id, the subset (with the type byte and index key of each element), the
// revision (an int64) and the push field (an ObjectID, or true).
func (r *Repo[P, I]) itemLimit(parent parentRef) int {
	return (r.itemBudget - len(parent.val.Value)) / r.cfg.Cap
}

// itemBudget is what a parent of Cap items leaves to the items and the
// parent's id value: patterns.MaxDocumentSize less the document's length
// and NUL, the _id element without its value, the subset element with its
// index keys, the revision and the push field (see Config.PushedField).
func itemBudget(cfg Config) int {
	budget := patterns.MaxDocumentSize - 5 - elemSize("_id", 0) -
		elemSize(cfg.Field, 5+indexKeys(cfg.Cap)) - elemSize(cfg.RevisionField, 8) -
		elemSize(cfg.PushedField, 12)
	if cfg.CountField != "" {
		budget -= elemSize(cfg.CountField, 8)
	}
	return budget
}

// validateRawID applies patterns.ValidateID to an encoded id (decoded
// first, unless plainID decides), and refuses what [Repo.Page] could not
// continue after: a type without a place in the sort order (a deprecated symbol: see acceptedType).
func validateRawID(v bson.RawValue) error {
	if plainID(v) {
		return nil
	}
	var id any
	if err := v.Unmarshal(&id); err != nil {
		return errs.Invalid("id %s: %v", v, err)
	}
	if err := patterns.ValidateID(id); err != nil {
		return err
	}
	if !acceptedType(v.Type) {
		return errs.Invalid("id of BSON type %s: pages could not continue after it", v.Type)
	}
	return nil
}

// checkScalar rejects the values that cannot serve as a sort key: those
// that a filter would not compare as a plain value (documents, whose keys
// could be operators; arrays, which match by their elements; regular
// expressions and JavaScript), those that range operators never match
// (null, undefined, MinKey, MaxKey, and NaN, double or decimal), and the
// deprecated symbols (see acceptedType).
func checkScalar(v bson.RawValue) error {
	if err := v.Validate(); err != nil {
		return errs.Invalid("sort value: %v", err)
	}
	if !acceptedType(v.Type) {
		return errs.Invalid("a BSON %s is not a scalar sort value", v.Type)
	}
	if isNaN(v) {
		return errs.Invalid("NaN is not a sort value: range operators never match it")
	}
	return nil
}

// isNaN reports whether v is a double or a decimal NaN.
func isNaN(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeDouble:
		return math.IsNaN(v.Double())
	case bson.TypeDecimal128:
		return v.Decimal128().IsNaN()
	}
	return false
}
