package subset

import (
	"encoding/binary"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

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
	if err := patterns.ValidateID(id); err != nil {
		return parentRef{}, fmt.Errorf("parent id: %w", err)
	}
	t, v, err := bson.MarshalValue(id)
	if err != nil { // ValidateID encodes it too, so this is unreachable in practice
		return parentRef{}, fmt.Errorf("parent id: %w", err)
	}
	elem := make([]byte, 0, 2+len(field)+len(v))
	elem = append(elem, byte(t))
	elem = append(elem, field...)
	elem = append(elem, 0)
	elem = append(elem, v...)
	return parentRef{id: id, elem: elem, val: bson.RawValue{Type: t, Value: v}}, nil
}

// encode turns an item into the document both places store. It rejects,
// wrapping patterns.ErrInvalid, an item that does not encode as a
// document, has no valid id, has no scalar sort value or names another
// parent; and, wrapping patterns.ErrTooLarge, one larger than a Cap-th of
// a document. It appends ParentField when the item lacks it; with newID
// and an IDField other than _id, it prepends a generated _id when the item
// has none, so that the copy in the subset equals the stored document.
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
		return entry{}, errs.Invalid("item %s has no sort field %q", id, r.cfg.SortField)
	}
	if err := checkScalar(sortKey); err != nil {
		return entry{}, fmt.Errorf("item %s: sort field %q: %w", id, r.cfg.SortField, err)
	}
	p, err := doc.LookupErr(r.cfg.ParentField)
	hasParent := err == nil
	if hasParent && !sameID(p, parent.val) {
		return entry{}, errs.Invalid("item %s: %s is %s, not the parent's id %s", id, r.cfg.ParentField, p, parent.val)
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
	if limit := patterns.MaxDocumentSize / r.cfg.Cap; len(doc) > limit {
		return entry{}, fmt.Errorf("%w: item %s is %d bytes; with a cap of %d items, an item may take at most %d", patterns.ErrTooLarge, id, len(doc), r.cfg.Cap, limit)
	}
	return entry{doc: doc, id: id}, nil
}

// idElemPrefix is the start of an ObjectID element named _id: its type
// byte and its key.
const idElemPrefix = "\x07_id\x00"

// encodeAll encodes items and rejects two items with the same id.
func (r *Repo[P, I]) encodeAll(items []I, parent parentRef) ([]entry, error) {
	out := make([]entry, len(items))
	for i, item := range items {
		e, err := r.encode(item, parent, true)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		for _, prev := range out[:i] {
			if prev.id.Equal(e.id) {
				return nil, errs.Invalid("item %d: id %s is given twice", i, e.id)
			}
		}
		out[i] = e
	}
	return out, nil
}

// validateRawID applies patterns.ValidateID to an encoded id.
func validateRawID(v bson.RawValue) error {
	var id any
	if err := v.Unmarshal(&id); err != nil {
		return errs.Invalid("id %s: %v", v, err)
	}
	return patterns.ValidateID(id)
}

// checkScalar rejects the values that cannot serve as a sort key: those
// that a filter would not compare as a plain value (documents, whose keys
// could be operators; arrays, which match by their elements; regular
// expressions and JavaScript), and those that range operators never match
// (null, undefined, MinKey, MaxKey).
func checkScalar(v bson.RawValue) error {
	switch v.Type {
	case bson.TypeEmbeddedDocument, bson.TypeArray, bson.TypeRegex, bson.TypeJavaScript,
		bson.TypeCodeWithScope, bson.TypeDBPointer, bson.TypeNull, bson.TypeUndefined,
		bson.TypeMinKey, bson.TypeMaxKey:
		return errs.Invalid("a BSON %s is not a scalar sort value", v.Type)
	}
	if err := v.Validate(); err != nil {
		return errs.Invalid("sort value: %v", err)
	}
	return nil
}

// sameID reports whether two encoded ids are the same value: the same
// bytes, or the same integer stored as int32 and as int64 (a Go int
// encodes as int32 when it fits).
func sameID(a, b bson.RawValue) bool {
	if a.Equal(b) {
		return true
	}
	x, okA := intValue(a)
	y, okB := intValue(b)
	return okA && okB && x == y
}

func intValue(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return v.AsInt64OK()
	}
	return 0, false
}
