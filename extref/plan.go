package extref

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// copyValue is the copy of one source document as S encodes it: what Of
// returns, marshalled. Every write and comparison uses these bytes, so a
// copy embedded from Of and a copy written by Sync are the same.
type copyValue struct {
	raw bson.Raw      // bson.Marshal of the S decoded from the source
	id  bson.RawValue // raw's id field
}

// want returns the value the copy's field f must hold; Type 0 when S omits
// it (an omitempty field at its zero value), in which case the field must
// be absent.
func (c copyValue) want(f string) bson.RawValue {
	v, _ := c.raw.LookupErr(f)
	return v
}

// staleCond returns the query condition that selects the copies of c, at
// prefix, that differ from c in at least one field:
//
//	{<prefix>.<id>: id, $or: [{<prefix>.<f>: {$ne: v}}, ..., {<prefix>.<g>: {$exists: true}}]}
//
// one clause per copied field ($exists for a field that S omits). Fields
// are compared one by one rather than the copy as a whole, because a whole
// embedded document compares field order too and may carry other fields.
// prefix is "" when the condition applies to an array element that is the
// copy itself (inside $elemMatch).
func staleCond(prefix string, ct copyType, c copyValue) bson.D {
	or := make(bson.A, len(ct.fields))
	for i, f := range ct.fields {
		cond := bson.D{{Key: "$exists", Value: true}}
		if v := c.want(f); v.Type != 0 {
			cond = bson.D{{Key: "$ne", Value: v}}
		}
		or[i] = bson.D{{Key: join(prefix, f), Value: cond}}
	}
	return bson.D{{Key: join(prefix, ct.id), Value: c.id}, {Key: "$or", Value: or}}
}

// setCopy returns the update that makes the copy at prefix equal to c:
// {$set: {<prefix>.<f>: v, ...}, $unset: {<prefix>.<g>: ""}}, each operator
// only when it has fields. The id is not written: the filter matched it.
func setCopy(prefix string, ct copyType, c copyValue) bson.D {
	var set, unset bson.D
	for _, f := range ct.fields {
		if v := c.want(f); v.Type != 0 {
			set = append(set, bson.E{Key: join(prefix, f), Value: v})
		} else {
			unset = append(unset, bson.E{Key: join(prefix, f), Value: ""})
		}
	}
	var u bson.D
	if len(set) > 0 {
		u = append(u, bson.E{Key: "$set", Value: set})
	}
	if len(unset) > 0 {
		u = append(u, bson.E{Key: "$unset", Value: unset})
	}
	return u
}

// nativePlan is the one updateMany that syncs a target on MongoDB.
type nativePlan struct {
	filter       bson.D
	update       bson.D
	arrayFilters []any // nil for a single embedded document
}

// elem is the arrayFilters identifier of the native array update.
const elem = "e"

// native builds the updateMany for target path p.
//
// A single embedded document ("customer"):
//
//	filter {customer.id: id, $or: [{customer.name: {$ne: name}}, ...]}
//	update {$set: {customer.name: name, ...}}
//
// Copies in array elements ("items[].product"): the filter selects the
// documents with at least one stale element and the array filter the stale
// elements themselves:
//
//	filter       {items: {$elemMatch: {product.id: id, $or: [{product.name: {$ne: name}}, ...]}}}
//	update       {$set: {items.$[e].product.name: name, ...}}
//	arrayFilters [{e.product.id: id, $or: [{e.product.name: {$ne: name}}, ...]}]
func (p copyPath) native(ct copyType, c copyValue) nativePlan {
	if p.array == "" {
		return nativePlan{filter: staleCond(p.copy, ct, c), update: setCopy(p.copy, ct, c)}
	}
	return nativePlan{
		filter:       bson.D{{Key: p.array, Value: bson.D{{Key: "$elemMatch", Value: staleCond(p.copy, ct, c)}}}},
		update:       setCopy(join(p.array, "$["+elem+"]", p.copy), ct, c),
		arrayFilters: []any{staleCond(join(elem, p.copy), ct, c)},
	}
}

// holders returns the filter that selects every document holding a copy
// of c at p, stale or not: {<path>.<id>: id}. The portable array path
// starts from it, because FerretDB 1.x rejects $elemMatch on the fields of
// array elements, so the stale elements are found in Go.
func (p copyPath) holders(ct copyType, c copyValue) bson.D {
	return bson.D{{Key: join(p.inDocument(), ct.id), Value: c.id}}
}

// rewrite returns the update of one document of an array target that the
// portable path sends: it sets the stale copies of c in the array arr by
// their indexes, guarded by their ids, so that an element that moved or was
// removed since arr was read makes the update match nothing instead of
// writing the wrong element:
//
//	filter {_id: docID, items.3.product.id: id, ...}
//	update {$set: {items.3.product.name: name, ...}}
//
// ok is false when no copy of c in arr is stale.
func (p copyPath) rewrite(docID bson.RawValue, arr bson.RawArray, ct copyType, c copyValue) (filter, update bson.D, ok bool) {
	vals, err := arr.Values()
	if err != nil {
		return nil, nil, false
	}
	filter = bson.D{{Key: "_id", Value: docID}}
	var set, unset bson.D
	for i, v := range vals {
		cp, isCopy := p.elementCopy(v)
		if !isCopy || !same(cp.Lookup(ct.id), c.id) {
			continue
		}
		at := join(p.array, strconv.Itoa(i), p.copy)
		changed := false
		for _, f := range ct.fields {
			want := c.want(f)
			if !stale(lookup(cp, f), want) {
				continue
			}
			changed = true
			if want.Type != 0 {
				set = append(set, bson.E{Key: join(at, f), Value: want})
			} else {
				unset = append(unset, bson.E{Key: join(at, f), Value: ""})
			}
		}
		if changed {
			filter = append(filter, bson.E{Key: join(at, ct.id), Value: c.id})
		}
	}
	if len(set) > 0 {
		update = append(update, bson.E{Key: "$set", Value: set})
	}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	return filter, update, len(update) > 0
}
