package subset

import (
	"encoding/binary"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
)

// commands builds every filter, update, projection and pipeline the
// repository sends, from the configuration alone: pure functions, pinned
// by commands_test.go for every plan (the push plan's cannot run on the
// embedded dev server).
type commands struct {
	field, rev           string                         // the parent's subset and revision fields
	pushed               string                         // the parent's push field (Config.PushedField)
	revOnly              *options.FindOneOptionsBuilder // parentFound's, built once: the driver only reads it
	orderRaw             bson.Raw                       // order, encoded once (pushUpdate)
	count                string                         // the parent's count field, "" for none
	parentField, idField string                         // the item's parent id and id fields
	idPath               string                         // the ids in the subset: field.idField
	order                bson.D                         // {SortField: d, IDField: d}, everywhere
	cap                  int
}

func newCommands(cfg Config) commands {
	dir := 1
	if cfg.Descending {
		dir = -1
	}
	order := bson.D{{Key: cfg.SortField, Value: dir}, {Key: cfg.IDField, Value: dir}}
	orderRaw, err := bson.Marshal(order)
	if err != nil {
		panic(err) // two ints always encode
	}
	return commands{
		field: cfg.Field, rev: cfg.RevisionField, count: cfg.CountField,
		pushed:      cfg.PushedField,
		revOnly:     options.FindOne().SetProjection(bson.D{{Key: cfg.RevisionField, Value: 1}}),
		parentField: cfg.ParentField, idField: cfg.IDField,
		idPath: cfg.Field + "." + cfg.IDField,
		order:  order, orderRaw: orderRaw,
		cap: cfg.Cap,
	}
}

// The parents.

// parent matches the parent: {_id: id}.
func (c commands) parent(parentID any) bson.D {
	return bson.D{{Key: "_id", Value: parentID}}
}

// parentHolding matches the parent while its subset holds the item:
// {_id: id, <field>.<idField>: itemID}.
func (c commands) parentHolding(parentID any, itemID any) bson.D {
	return bson.D{{Key: "_id", Value: parentID}, {Key: c.idPath, Value: itemID}}
}

// parentState is the projection of what a recomputation reads of a
// parent, its revision, the ids in its subset, its count and on the push
// plan its push field; nil (the whole parent) on a plan that measures the
// parent's size.
func (c commands) parentState(p plan) bson.D {
	if p.measure {
		return nil
	}
	proj := bson.D{{Key: c.rev, Value: 1}, {Key: c.idPath, Value: 1}}
	if c.count != "" {
		proj = append(proj, bson.E{Key: c.count, Value: 1})
	}
	if p.push {
		proj = append(proj, bson.E{Key: c.pushed, Value: 1})
	}
	return proj
}

// pushFilter is the guard of the push plan's Add: the parent, in the
// incarnation Add read (its revision between the stamp inc and the next
// multiple of 2^32, see newIncarnation), while its subset holds none of
// the ids and no recomputation is announced (the push field is not true,
// see announce): {_id: id, rev: {$gte: inc, $lt: inc + 2^32},
// <field>.<idField>: {$nin: ids}, <pushed>: {$ne: true}}. A parent
// deleted and created again since Add's read matches it no more.
func (c commands) pushFilter(parentID any, inc int64, ids []bson.RawValue) bson.D {
	return append(c.inIncarnation(parentID, inc),
		bson.E{Key: c.idPath, Value: bson.D{{Key: "$nin", Value: ids}}},
		bson.E{Key: c.pushed, Value: neTrue},
	)
}

// inIncarnation matches the parent in the incarnation inc (a stamp, see
// newIncarnation): {_id: id, rev: {$gte: inc, $lt: inc + 2^32}}.
// (Room for pushFilter's two conditions more.)
func (c commands) inIncarnation(parentID any, inc int64) bson.D {
	f := make(bson.D, 2, 4)
	f[0] = bson.E{Key: "_id", Value: parentID}
	f[1] = bson.E{Key: c.rev, Value: bson.D{{Key: "$gte", Value: inc}, {Key: "$lt", Value: inc + minStamp}}}
	return f
}

// pushUpdate pushes the documents into the subset, sorts it in the
// configured order and keeps the first Cap, and sets the push field to
// token, a new ObjectID: one atomic update, which leaves the revision
// alone (see the package documentation). {$push: {<field>: {$each: docs,
// $sort: <order>, $slice: Cap}}, $set: {<pushed>: token}}, encoded here
// in one buffer: it is Add's hot path, where a bson.D of four levels
// cost nine allocations more.
func (c commands) pushUpdate(docs []bson.Raw, token bson.ObjectID) bson.Raw {
	size := 128 + len(c.field) + len(c.pushed) + len(c.orderRaw)
	for _, d := range docs {
		size += len(d) + 8
	}
	start, b := bsoncore.AppendDocumentStart(make([]byte, 0, size))
	push, b := bsoncore.AppendDocumentElementStart(b, "$push")
	field, b := bsoncore.AppendDocumentElementStart(b, c.field)
	each, b := bsoncore.AppendArrayElementStart(b, "$each")
	for i, d := range docs {
		b = bsoncore.AppendDocumentElement(b, strconv.Itoa(i), d)
	}
	b, _ = bsoncore.AppendArrayEnd(b, each)
	b = bsoncore.AppendDocumentElement(b, "$sort", c.orderRaw)
	b = bsoncore.AppendInt32Element(b, "$slice", int32(c.cap))
	b, _ = bsoncore.AppendDocumentEnd(b, field)
	b, _ = bsoncore.AppendDocumentEnd(b, push)
	set, b := bsoncore.AppendDocumentElementStart(b, "$set")
	b = bsoncore.AppendObjectIDElement(b, c.pushed, token)
	b, _ = bsoncore.AppendDocumentEnd(b, set)
	b, _ = bsoncore.AppendDocumentEnd(b, start)
	return b
}

// casFilter is the compare-and-set of a recomputation: the parent, at
// the revision it was read at (stamped first: see unstamped), {_id: id,
// rev: r}. On the push plan, unless the recomputation announced itself
// (announced: pushes match nothing since its read), it also holds that
// no push may have sorted an item out of the subset since the read, which
// the merge could not keep: {$or: [{<pushed>: <as read>} (no push since
// the read; {$exists: false} when none was read), {$expr: {$lt: [{$size:
// <field>}, Cap]}} (the subset is not full, so no push sorted anything
// out)]}; a subset field that is not an array counts as empty. A push
// that filled the subset and sorted nothing out fails it too.
func (c commands) casFilter(p plan, parentID any, st parentState, announced bool) bson.D {
	f := bson.D{{Key: "_id", Value: parentID}, {Key: c.rev, Value: st.rev}}
	if !p.push || announced {
		return f
	}
	unpushed := bson.D{{Key: c.pushed, Value: bson.D{{Key: "$exists", Value: false}}}}
	if st.pushed.Type != 0 {
		unpushed = bson.D{{Key: c.pushed, Value: bson.D{{Key: "$eq", Value: st.pushed}}}}
	}
	field := "$" + c.field
	size := bson.D{{Key: "$size", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isArray", Value: field}}, field, bson.A{}}}}}}
	return append(f, bson.E{Key: "$or", Value: bson.A{
		unpushed,
		bson.D{{Key: "$expr", Value: bson.D{{Key: "$lt", Value: bson.A{size, c.cap}}}}},
	}})
}

// announce is the update of the push plan's read of a parent by a
// recomputation that a push made start again (see casFilter), filtered
// on the parent in the incarnation it recomputes (inIncarnation, so that
// a parent deleted and created again gets none): {$set: {<pushed>:
// true}}, which makes every push match nothing (see pushFilter) until a
// compare-and-set, which sets the field to a new ObjectID (mergeUpdate).
func (c commands) announce() bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: c.pushed, Value: true}}}}
}

// neTrue is {$ne: true}, built once: the driver only reads it.
var neTrue any = bson.D{{Key: "$ne", Value: true}}

// announced are the options of the announcing read: the parent as
// updated, in the projection of parentState.
func (c commands) announced(p plan) *options.FindOneAndUpdateOptionsBuilder {
	opts := options.FindOneAndUpdate().SetReturnDocument(options.After)
	if proj := c.parentState(p); proj != nil {
		opts.SetProjection(proj)
	}
	return opts
}

// unstamped matches the parent while it has no stamped revision: {_id:
// id, $or: [{rev: {$not: {$type: "long"}}}, {rev: {$lt: 2^32}}, {rev:
// {$gte: 2^62 + 2^32}}, {rev: {$type: "array"}}]}, a revision missing, of
// any type but an int64 (null; a double, which a JavaScript client may
// write back, and which $inc cannot move past 2^53; a decimal, NaN, a
// string), an int64 below every stamp (as the application created the
// parent: a Go int64 field without omitempty writes 0; or counted before
// revisions were stamped) or above every stamp's revisions (see
// maxStamp), or an array (which $type and $lt would match by its
// elements: an array holding an int64 stamp is no stamp). It is the filter
// of the stamp that a recomputation writes before its first
// compare-and-set on a parent no recomputation has written since its
// creation.
func (c commands) unstamped(parentID any) bson.D {
	return bson.D{{Key: "_id", Value: parentID}, {Key: "$or", Value: bson.A{
		bson.D{{Key: c.rev, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "long"}}}}}},
		bson.D{{Key: c.rev, Value: bson.D{{Key: "$lt", Value: int64(minStamp)}}}},
		bson.D{{Key: c.rev, Value: bson.D{{Key: "$gte", Value: int64(maxStamp)}}}},
		bson.D{{Key: c.rev, Value: bson.D{{Key: "$type", Value: "array"}}}},
	}}}
}

// minStamp is the least stamped revision, 2^32: the stamps are its
// multiples (newIncarnation), and recomputations count up from them.
// maxStamp bounds them from above: the greatest stamp, 2^62, plus the
// 2^32 revisions of its incarnation. An int64 outside [minStamp,
// maxStamp) is no stamp: the push's filter could not bound its
// incarnation (inc + 2^32 would overflow near 2^63), nor $inc move it
// past 2^63 - 1.
const (
	minStamp = 1 << 32
	maxStamp = 1<<62 + minStamp
)

// stamp sets the revision to incarnation, a random multiple of 2^32
// (newIncarnation): {$set: {rev: incarnation}}; on the push plan the push
// field to token, a new ObjectID, too (a copy of a parent made while a
// recomputation held pushes off carries true there, which would hold off
// the new parent's pushes).
func (c commands) stamp(p plan, incarnation int64, token bson.ObjectID) bson.D {
	set := bson.D{{Key: c.rev, Value: incarnation}}
	if p.push {
		set = append(set, bson.E{Key: c.pushed, Value: token})
	}
	return bson.D{{Key: "$set", Value: set}}
}

// recomputation is the update of a recomputation on plan p: mergeUpdate
// on the push plan, setUpdate otherwise; n is the count of the parent's
// items, set in the count field when there is one; token, a new
// ObjectID, the push field's value after a compare-and-set on the push
// plan.
func (c commands) recomputation(p plan, top []bson.Raw, stale []bson.RawValue, n int64, token bson.ObjectID) any {
	if p.push {
		return c.mergeUpdate(top, stale, n, token)
	}
	return c.setUpdate(top, n)
}

// setUpdate is the portable plan's recomputation: it sets the subset to
// top (and the count to n) and increments the revision.
func (c commands) setUpdate(top []bson.Raw, n int64) bson.D {
	if top == nil {
		top = []bson.Raw{} // an empty array, not null
	}
	set := bson.D{{Key: c.field, Value: top}}
	if c.count != "" {
		set = append(set, bson.E{Key: c.count, Value: n})
	}
	return bson.D{
		{Key: "$set", Value: set},
		{Key: "$inc", Value: bson.D{{Key: c.rev, Value: int64(1)}}},
	}
}

// mergeUpdate is the push plan's recomputation, a pipeline update that
// sets the subset to the first Cap, in the configured order, of top (the
// first Cap items as read from the items collection) and of the elements
// pushed since the parent was read: those of the current subset whose id
// is neither in top nor in stale (the ids the subset held when read that
// top does not hold). It increments the revision, and sets the push
// field to token, a new ObjectID, which ends an announcement (see
// announce). In the expression language:
//
//	[{$set: {
//	  <field>: {$let: {vars: {top: {$literal: top}}, in: {$slice: [{$sortArray: {
//	    input: {$concatArrays: ["$$top", {$filter: {
//	      input: {$cond: [{$isArray: "$<field>"}, "$<field>", []]}, as: "e",
//	      cond: {$and: [
//	        {$ne: [{$type: "$$e.<idField>"}, "missing"]},
//	        {$not: [{$in: ["$$e.<idField>", {$concatArrays: ["$$top.<idField>", {$literal: stale}]}]}]}]}}}]},
//	    sortBy: {<sortField>: d, <idField>: d}}}, Cap]}}},
//	  <rev>: {$add: [{$ifNull: ["$<rev>", 0]}, 1]},
//	  <pushed>: {$literal: token},
//	  <count>: {$literal: n}}}]
//
// The items are literals, so that a string starting with '$' in an item
// is not read as a field path. A subset field that is not an array counts
// as empty, and an element without an id is dropped, as a set would.
// $sortArray sorts as $push's $sort does; $in compares ids as the server
// compares them (7 is 7.0). The count is set only when there is a count
// field.
func (c commands) mergeUpdate(top []bson.Raw, stale []bson.RawValue, n int64, token bson.ObjectID) bson.A {
	if top == nil {
		top = []bson.Raw{}
	}
	if stale == nil {
		stale = []bson.RawValue{} // $concatArrays of null is null
	}
	field, elemID := "$"+c.field, "$$e."+c.idField
	pushed := bson.D{{Key: "$filter", Value: bson.D{
		{Key: "input", Value: bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isArray", Value: field}}, field, bson.A{}}}}},
		{Key: "as", Value: "e"},
		{Key: "cond", Value: bson.D{{Key: "$and", Value: bson.A{
			bson.D{{Key: "$ne", Value: bson.A{bson.D{{Key: "$type", Value: elemID}}, "missing"}}},
			bson.D{{Key: "$not", Value: bson.A{bson.D{{Key: "$in", Value: bson.A{
				elemID,
				bson.D{{Key: "$concatArrays", Value: bson.A{"$$top." + c.idField, bson.D{{Key: "$literal", Value: stale}}}}},
			}}}}}},
		}}}},
	}}}
	subset := bson.D{{Key: "$let", Value: bson.D{
		{Key: "vars", Value: bson.D{{Key: "top", Value: bson.D{{Key: "$literal", Value: top}}}}},
		{Key: "in", Value: bson.D{{Key: "$slice", Value: bson.A{
			bson.D{{Key: "$sortArray", Value: bson.D{
				{Key: "input", Value: bson.D{{Key: "$concatArrays", Value: bson.A{"$$top", pushed}}}},
				{Key: "sortBy", Value: c.order},
			}}},
			c.cap,
		}}}},
	}}}
	rev := bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$" + c.rev, int64(0)}}}, int64(1)}}}
	set := bson.D{{Key: c.field, Value: subset}, {Key: c.rev, Value: rev}, {Key: c.pushed, Value: bson.D{{Key: "$literal", Value: token}}}}
	if c.count != "" {
		set = append(set, bson.E{Key: c.count, Value: bson.D{{Key: "$literal", Value: n}}})
	}
	return bson.A{bson.D{{Key: "$set", Value: set}}}
}

// countProjection reads a parent's count field alone, for Count.
func (c commands) countProjection() bson.D { return bson.D{{Key: c.count, Value: 1}} }

// idOnly is the projection of a document's _id alone.
var idOnly = bson.D{{Key: "_id", Value: 1}}

// parentFound reads only the revision of a parent (and its _id), for
// the push plan's Add, which reads its parent first to know it exists
// and which incarnation it is.
func (c commands) parentFound() *options.FindOneOptionsBuilder {
	return c.revOnly
}

// parentsPageSize is the number of parent ids a page of RebuildAll reads.
const parentsPageSize = 100

// The items.

// items matches the parent's items: {<parentField>: id}.
func (c commands) items(parentID any) bson.D {
	return bson.D{{Key: c.parentField, Value: parentID}}
}

// item matches one item of the parent.
func (c commands) item(parentID, itemID any) bson.D {
	return bson.D{{Key: c.parentField, Value: parentID}, {Key: c.idField, Value: itemID}}
}

// itemsIn matches the parent's items with the given ids.
func (c commands) itemsIn(parentID any, ids []bson.RawValue) bson.D {
	return bson.D{
		{Key: c.parentField, Value: parentID},
		{Key: c.idField, Value: bson.D{{Key: "$in", Value: ids}}},
	}
}

// takenElsewhere matches the documents that hold the place of the
// entries with ids ids and _ids docIDs (the same when IDField is _id)
// but are not the parent's items with those ids: an item of another
// parent with one of the ids, or, with another IDField, a document with
// one of the _ids. Add reads them (their _ids alone, idOnly) when its
// insert found ids taken that the parent's items no longer held.
func (c commands) takenElsewhere(parentID any, ids, docIDs []bson.RawValue) bson.D {
	return bson.D{
		{Key: "_id", Value: bson.D{{Key: "$in", Value: docIDs}}},
		{Key: "$nor", Value: bson.A{c.itemsIn(parentID, ids)}},
	}
}

// idsOnly reads the _ids alone of the documents it finds: RebuildAll's
// pages of parents, Add's read of ids held elsewhere.
func (c commands) idsOnly() *options.FindOptionsBuilder {
	return options.Find().SetProjection(idOnly)
}

// itemsAsPushed matches the items of the parent stored exactly as docs
// (each field of a doc equal, the parent field as the parent's id): what
// Add counts after its push, so that an item that a concurrent writer
// removed, or replaced with another version, after the insert is found.
func (c commands) itemsAsPushed(parentID any, docs []bson.Raw) bson.D {
	alts := make(bson.A, 0, len(docs))
	for _, d := range docs {
		alts = append(alts, c.withoutParent(d))
	}
	// The ids' $in beside the $or, so that the count routes as
	// itemsIn's does: by the parent and the ids.
	ids := make(bson.A, 0, len(docs))
	for _, d := range docs {
		ids = append(ids, d.Lookup(c.idField))
	}
	return bson.D{{Key: c.parentField, Value: parentID}, {Key: c.idField, Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "$or", Value: alts}}
}

// withoutParent is the item document d (as the driver encoded it) less
// its parent field, as one encoded document: its elements copied as they
// are, in their order.
func (c commands) withoutParent(d bson.Raw) bson.Raw {
	out := make([]byte, 4, len(d))
	elems, _ := bsoncore.Document(d).Elements()
	for _, e := range elems {
		if e.Key() != c.parentField {
			out = append(out, e...)
		}
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// firstN reads the first n items in the configured order in one round
// trip: a batch one larger than the limit lets the server close the
// cursor in its first reply (FerretDB keeps it open, and the driver sends
// a getMore, when they are equal).
func (c commands) firstN(n int) *options.FindOptionsBuilder {
	return options.Find().SetSort(c.order).SetLimit(int64(n)).SetBatchSize(int32(n + 1))
}

// page matches the parent's items that come after the cursor (s, i) in
// the configured order: {<parentField>: id, $or: [{<sortField>: {$gt:
// s}}, {<sortField>: {$exists: true, $not: {$type: through}}},
// {<sortField>: s, <idField>: {$gt: i}}, {<sortField>: s, <idField>:
// {$exists: true, $not: {$type: through}}}]}, with $lt when descending,
// and the places only descending has after a value (NaN, missing: see
// after); the parent's items when the cursor is the zero Cursor. The
// range operators compare values of one type only (numbers count as
// one), so the $not clauses reach the values of the other types, with
// through the $type aliases of the types up to the cursor's
// (keyset.TypesThrough): the types every server names and sorts after
// it, and those a page cannot place (symbols, MinKey, undefined, regular
// expressions, JavaScript, DBPointer, MaxKey, arrays), wherever they
// sort, which the page refuses when it meets one (see placed).
func (c commands) page(parentID any, cur Cursor) bson.D {
	filter := c.items(parentID)
	if cur.IsZero() {
		return filter
	}
	dir := c.order[0].Value.(int)
	sortField := c.order[0].Key
	tie := bson.E{Key: sortField, Value: cur.sort}
	or := after(sortField, cur.sort, dir)
	for _, clause := range after(c.idField, cur.id, dir) {
		or = append(or, append(bson.D{tie}, clause.(bson.D)...))
	}
	return append(filter, bson.E{Key: "$or", Value: or})
}

// after returns the clauses of an $or that match the values of field
// that come after v in direction dir (1 ascending, -1 descending) in the
// server's sort order: {field: {$gt: v}} ($lt descending; after a NaN,
// {$gte: -Infinity} ascending, the numbers above it, and nothing
// descending, as package keyset pages past a NaN _id), and {field:
// {$exists: true, $not: {$type: [...]}}} with the types sorted up to v's
// (see page). Descending, two more places come after every value of the
// order: NaN, which sorts below every other number and which no range
// operator matches (after a number v, {field: {$type: "number", $not:
// {$gte: v}}} replaces {$lt: v}: the numbers below v and NaN), and a
// missing field, which sorts with null ({field: {$exists: false}}).
func after(field string, v bson.RawValue, dir int) bson.A {
	past := bson.D{{Key: "$gt", Value: v}}
	switch {
	case bsonid.IsNaN(v) && dir > 0:
		// NaN sorts before every other number, and $gt finds none above it.
		past = bson.D{{Key: "$gte", Value: math.Inf(-1)}}
	case bsonid.IsNaN(v):
		// Descending, no number comes after NaN.
		past = nil
	case dir < 0:
		past = bson.D{{Key: "$lt", Value: v}}
		if _, isNumber := bsonid.Number(v); isNumber {
			past = bson.D{{Key: "$type", Value: "number"}, {Key: "$not", Value: bson.D{{Key: "$gte", Value: v}}}}
		}
	}
	var out bson.A
	if past != nil {
		out = append(out, bson.D{{Key: field, Value: past}})
	}
	out = append(out, bson.D{{Key: field, Value: bson.D{
		{Key: "$exists", Value: true},
		{Key: "$not", Value: bson.D{{Key: "$type", Value: keyset.TypesThrough(v.Type, dir)}}},
	}}})
	if dir < 0 {
		out = append(out, bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: false}}}})
	}
	return out
}

// placed reports whether the page filters place a sort value or an item
// id of type t, missing (0) included: whether the $not clauses of page
// match it only after the cursor. Those of the other types (symbols,
// MinKey, undefined, regular expressions, JavaScript, DBPointer, MaxKey,
// arrays) they match wherever they sort.
func placed(t bson.Type) bool { return t == 0 || keyset.Ordered(t) }

// acceptedTypes are the BSON types a sort value (checkScalar) or an item
// id (validateRawID) may have: those whose place in the server's sort
// order package keyset knows, so that Page continues after any of them,
// less null and documents, which checkScalar refuses as sort values and
// patterns.ValidateID as ids. The deprecated symbols, which the server
// sorts with the strings and no $type alias of FerretDB 1.x names, have
// no place.
func acceptedType(t bson.Type) bool {
	return keyset.Ordered(t) && t != bson.TypeNull && t != bson.TypeEmbeddedDocument
}
