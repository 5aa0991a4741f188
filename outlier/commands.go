package outlier

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The fields of an overflow document:
//
//	{_id, parent: <parent id>, seq: <int64>, count: <int64>, bytes: <int64>, items: [...]}
//
// seq orders the documents of one parent (unique with parent); count is
// the number of items held (Append raises it, Remove lowers it); bytes is
// the encoded size of the items appended (Remove does not lower it, so it
// is an upper bound) and keeps the document under 16 MiB.
const (
	fParent = "parent"
	fSeq    = "seq"
	fCount  = "count"
	fBytes  = "bytes"
	fItems  = "items"
)

// The documents the repository sends, built by pure functions so that
// commands_test.go pins them exactly for every plan (the native ones
// cannot run on FerretDB 1.x). Each takes only what varies between calls.

// parentFilter matches the parent.
func parentFilter(parentID any) bson.D {
	return bson.D{{Key: "_id", Value: parentID}}
}

// stateProjection is what Append reads of a parent to decide where items
// go. With the server's size limit, the flag, the tail hint and the item
// ids (the length of the array follows from them), not the items; without
// it, the whole parent (nil: no projection), whose size Append needs.
func (r *Repo[P, I]) stateProjection(p plan) bson.D {
	if !p.serverSizeLimit {
		return nil
	}
	return bson.D{{Key: r.cfg.FlagField, Value: 1}, {Key: r.cfg.TailField, Value: 1}, {Key: r.idPath, Value: 1}}
}

// pushParentCommand is the filter and the update of a guarded push of
// items into the parent. The filter matches the parent while it is open
// (flag not true), has an array ({$type: "array"}: $push fails on null and on a value of
// another type, which Append reads to say so), can take the k
// items and holds none of them: the atomic guard of a push into the
// parent. "Holds none" is $nor of $in rather than $nin, which means the
// same on MongoDB but which FerretDB 1.x reads, on the ids of an array of
// documents, as "some element's id is not among them": there a retried
// push, after one whose reply was lost, would store its items twice.
// "Can take" is a count, n the number of items Append read (unread: it
// has not read the parent). Without the server's size limit, exactly the
// n items read, which Append sized the push for ({$size: n}): a
// concurrent push makes it match nothing. With it, at most Cap-k items,
// whatever others pushed meanwhile (the server refuses the push if it
// does not fit in bytes): no element at index Cap-k, or, once read,
// exactly the n items read. The "or" is what makes it exact: MongoDB (and
// FerretDB) read the path Field.<Cap-k> both as the element at that index
// and as the field of that name in any element (mongodb/mongo
// src/mongo/db/matcher/path_test.cpp, ArrayIndex3), so an item with a
// field named "<Cap-k>" makes {Field.<Cap-k>: {$exists: false}} match
// nothing, never something it should not: the push then misses once, and
// the push after the read matches by the count. ($size takes one number,
// not a range; $expr would, but FerretDB 1.x lacks it.)
//
// The update appends the items to the parent's array ({$each} for more
// than one) and sets the flag to false and the tail hint to int64 0, what
// they are while the parent is open: the push, whose size the server (or
// Append) checks with them, leaves room for closeUpdate, which changes
// their values and not their sizes. Both are encoded here, in one buffer
// (the push is Append's hot path, where bson.D values cost 15 allocations
// to build and the driver's encoding of them more: 138 allocations an
// Append against 125 by hand, 2026-12-03), but for the parent's id, which
// stays the caller's value as in updateParentNative.
func (r *Repo[P, I]) pushParentCommand(p plan, parentID any, n int, items []item) (filter bson.D, update bson.Raw) {
	size := 160 + 3*len(r.cfg.Field) + len(r.idPath) + 2*len(r.cfg.FlagField) + len(r.cfg.TailField)
	for _, it := range items {
		size += len(it.id.Value) + len(it.raw) + 16
	}
	b := make([]byte, 0, size)
	filter = make(bson.D, 0, 5)
	filter = append(filter, bson.E{Key: "_id", Value: parentID}, bson.E{Key: r.cfg.FlagField, Value: neTrue})
	switch {
	case !p.serverSizeLimit:
		var cond bson.Raw
		b, cond = appendSizeIs(b, n)
		filter = append(filter, bson.E{Key: r.cfg.Field, Value: cond})
	case n == unread:
		filter = append(filter, bson.E{Key: r.cfg.Field, Value: isArray}, bson.E{Key: r.elementPath(r.cfg.Cap - len(items)), Value: notExists})
	default:
		start := len(b)
		var or, clause, cond int32
		or, b = bsoncore.AppendArrayStart(b)
		clause, b = bsoncore.AppendDocumentElementStart(b, "0")
		b = bsoncore.AppendDocumentElement(b, r.elementPath(r.cfg.Cap-len(items)), notExistsRaw)
		b, _ = bsoncore.AppendDocumentEnd(b, clause)
		clause, b = bsoncore.AppendDocumentElementStart(b, "1")
		cond, b = bsoncore.AppendDocumentElementStart(b, r.cfg.Field)
		b = bsoncore.AppendInt32Element(b, "$size", int32(n))
		b, _ = bsoncore.AppendDocumentEnd(b, cond)
		b, _ = bsoncore.AppendDocumentEnd(b, clause)
		b, _ = bsoncore.AppendArrayEnd(b, or)
		filter = append(filter, bson.E{Key: r.cfg.Field, Value: isArray}, bson.E{Key: "$or", Value: bsoncore.Array(b[start:len(b):len(b)])})
	}
	start := len(b)
	nor, b := bsoncore.AppendArrayStart(b)
	clause, b := bsoncore.AppendDocumentElementStart(b, "0")
	cond, b := bsoncore.AppendDocumentElementStart(b, r.idPath)
	in, b := bsoncore.AppendArrayElementStart(b, "$in")
	for i, it := range items {
		b = bsoncore.AppendValueElement(b, strconv.Itoa(i), bsoncore.Value{Type: bsoncore.Type(it.id.Type), Data: it.id.Value})
	}
	b, _ = bsoncore.AppendArrayEnd(b, in)
	b, _ = bsoncore.AppendDocumentEnd(b, cond)
	b, _ = bsoncore.AppendDocumentEnd(b, clause)
	b, _ = bsoncore.AppendArrayEnd(b, nor)
	filter = append(filter, bson.E{Key: "$nor", Value: bsoncore.Array(b[start:len(b):len(b)])})

	start = len(b)
	doc, b := bsoncore.AppendDocumentStart(b)
	push, b := bsoncore.AppendDocumentElementStart(b, "$push")
	if len(items) == 1 {
		b = bsoncore.AppendDocumentElement(b, r.cfg.Field, items[0].raw)
	} else {
		field, c := bsoncore.AppendDocumentElementStart(b, r.cfg.Field)
		each, c := bsoncore.AppendArrayElementStart(c, "$each")
		for i, it := range items {
			c = bsoncore.AppendDocumentElement(c, strconv.Itoa(i), it.raw)
		}
		c, _ = bsoncore.AppendArrayEnd(c, each)
		b, _ = bsoncore.AppendDocumentEnd(c, field)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, push)
	set, b := bsoncore.AppendDocumentElementStart(b, "$set")
	b = bsoncore.AppendBooleanElement(b, r.cfg.FlagField, false)
	b = bsoncore.AppendInt64Element(b, r.cfg.TailField, 0)
	b, _ = bsoncore.AppendDocumentEnd(b, set)
	b, _ = bsoncore.AppendDocumentEnd(b, doc)
	return filter, b[start:]
}

// appendSizeIs appends {$size: n} (see sizeIs) to b, and returns it.
func appendSizeIs(b []byte, n int) ([]byte, bson.Raw) {
	start := len(b)
	doc, b := bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendInt32Element(b, "$size", int32(n))
	b, _ = bsoncore.AppendDocumentEnd(b, doc)
	return b, b[start:len(b):len(b)]
}

// Conditions that never change, shared by every filter that uses them
// (the driver only reads the documents it is given), held as interface
// values so that using one allocates nothing.
var (
	notExistsRaw     = mustMarshal(bson.D{{Key: "$exists", Value: false}})
	neTrue       any = mustMarshal(bson.D{{Key: "$ne", Value: true}})
	isArray      any = mustMarshal(bson.D{{Key: "$type", Value: "array"}})
	notExists    any = notExistsRaw
	exists       any = mustMarshal(bson.D{{Key: "$exists", Value: true}})
)

// mustMarshal encodes a document known to encode.
func mustMarshal(d bson.D) bson.Raw {
	raw, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return raw
}

// unread is the n of [Repo.pushParentCommand] for a push sent before
// Append read the parent.
const unread = -1

// sizeIs is the condition that an array holds exactly n elements: {$size:
// n}, which matches arrays only (not null, absent or other values) and,
// unlike a path through an element's index, no field of an element.
func sizeIs(n int) bson.D {
	return bson.D{{Key: "$size", Value: n}}
}

// closeFilter matches the parent while it holds none of the items and is
// still the parent Append read: the guard of the write that announces an
// overflow document, so that an item another process pushed into the
// parent while it was open is not stored again in overflow, and so that
// the flag of a parent deleted and inserted again since the read is not
// set for an item that goes into it. held is readClosed for a parent read
// closed: the filter requires the flag true, which only a new parent with
// the same id can lack. For a parent read open, held is how many items it
// holds (those read, with those the Append pushed since): the filter
// requires an array of exactly held items ({$size: held}), which a new
// parent holding another number lacks, as does one that a Remove gave
// room or that another process pushed into. (Not an element at index
// held-1: MongoDB reads that path as a field of that name in any element
// too; see [Repo.pushParentCommand].) "Holds none" is $nor of $in, as in
// [Repo.pushParentCommand].
func (r *Repo[P, I]) closeFilter(parentID any, held int, items []item) bson.D {
	f := make(bson.D, 0, 3)
	f = append(f, bson.E{Key: "_id", Value: parentID})
	if held == readClosed {
		f = append(f, bson.E{Key: r.cfg.FlagField, Value: true})
	} else {
		f = append(f, bson.E{Key: r.cfg.Field, Value: sizeIs(held)})
	}
	return append(f, bson.E{Key: "$nor", Value: bson.A{bson.D{{Key: r.idPath, Value: bson.D{{Key: "$in", Value: ids(items)}}}}}})
}

// closeUpdate marks the parent as overflowed and raises its tail hint to
// seq, before the overflow document seq is written. On a parent that
// Insert or a push wrote it adds no byte: both fields are there already,
// a bool and an int64.
func (r *Repo[P, I]) closeUpdate(seq int64) bson.D {
	return bson.D{
		{Key: "$set", Value: bson.D{{Key: r.cfg.FlagField, Value: true}}},
		{Key: "$max", Value: bson.D{{Key: r.cfg.TailField, Value: seq}}},
	}
}

// newArrayFilter and newArrayUpdate give the parent an empty array where
// its array field is null or absent (a parent written by other means, a
// nil slice stored without omitempty), so that items can be pushed.
func (r *Repo[P, I]) newArrayFilter(parentID any) bson.D {
	return bson.D{{Key: "_id", Value: parentID}, {Key: r.cfg.Field, Value: nil}}
}

func (r *Repo[P, I]) newArrayUpdate() bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: r.cfg.Field, Value: bson.A{}}}}}
}

// overflowQuery finds the overflow documents of the parent from seq
// onwards (the newest is where room is) and those holding any of the items
// (so that a retried Append does not store them twice). Each branch is
// served by one index of [Repo.Indexes].
func (r *Repo[P, I]) overflowQuery(parentID any, from int64, items []item) bson.D {
	return bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fParent, Value: parentID}, {Key: fSeq, Value: bson.D{{Key: "$gte", Value: from}}}},
		bson.D{{Key: fParent, Value: parentID}, {Key: r.itemsIDPath, Value: bson.D{{Key: "$in", Value: ids(items)}}}},
	}}}
}

// leftoversFilter matches the parent's overflow documents with the given
// _ids: those an Append found left over from a deleted parent.
func leftoversFilter(parentID any, docIDs []bson.RawValue) bson.D {
	return bson.D{{Key: fParent, Value: parentID}, {Key: "_id", Value: bson.D{{Key: "$in", Value: docIDs}}}}
}

// overflowQueryProjection reads the bookkeeping and the item ids of the
// documents overflowQuery finds, not the items.
func (r *Repo[P, I]) overflowQueryProjection() bson.D {
	return bson.D{{Key: fSeq, Value: 1}, {Key: fCount, Value: 1}, {Key: fBytes, Value: 1}, {Key: r.itemsIDPath, Value: 1}}
}

// pushOverflowFilter matches the overflow document seq of the parent while
// it has room for the items, of size bytes (an element overhead included)
// within budget, and holds none of them: the guard on the ids is what
// keeps two Appends of one id that overlap (a retry racing the attempt it
// gave up on, which the server still runs) from storing it twice in one
// document. "Holds none" is $nor of $in, as in [Repo.pushParentCommand].
func (r *Repo[P, I]) pushOverflowFilter(parentID any, seq int64, items []item, size, budget int) bson.D {
	return bson.D{
		{Key: fParent, Value: parentID},
		{Key: fSeq, Value: seq},
		{Key: fCount, Value: bson.D{{Key: "$lte", Value: int64(r.cfg.OverflowCap - len(items))}}},
		{Key: fBytes, Value: bson.D{{Key: "$lte", Value: int64(budget - size)}}},
		{Key: "$nor", Value: bson.A{bson.D{{Key: r.itemsIDPath, Value: bson.D{{Key: "$in", Value: ids(items)}}}}}},
	}
}

// pushOverflowUpdate appends items of total size bytes to an overflow
// document; as an upsert it creates the document (parent and seq come
// from the filter's equalities).
func pushOverflowUpdate(items []item, size int) bson.D {
	return bson.D{
		{Key: "$inc", Value: bson.D{{Key: fCount, Value: int64(len(items))}, {Key: fBytes, Value: int64(size)}}},
		{Key: "$push", Value: bson.D{{Key: fItems, Value: pushValue(items)}}},
	}
}

// pushValue is the value of a $push of items: the item itself for one (a
// document: $push appends it as it is), {$each: [...]} for several.
func pushValue(items []item) any {
	if len(items) == 1 {
		return items[0].raw
	}
	return bson.D{{Key: "$each", Value: raws(items)}}
}

// elementPath returns the path of the element at index i of the parent's
// array, Field.<i>; the paths of the indexes a push guards on are built
// once, by [New].
func (r *Repo[P, I]) elementPath(i int) string {
	if i < len(r.paths) {
		return r.paths[i]
	}
	return r.cfg.Field + "." + strconv.Itoa(i)
}

// elementPaths returns Field.<i> for i from 0 to Cap (at most
// maxElementPaths of them), for elementPath.
func elementPaths(cfg Config) []string {
	paths := make([]string, min(cfg.Cap+1, maxElementPaths))
	for i := range paths {
		paths[i] = cfg.Field + "." + strconv.Itoa(i)
	}
	return paths
}

// maxElementPaths bounds the memory of the paths built once per
// repository: about 20 KiB.
const maxElementPaths = 1024

// overflowFilter matches the overflow documents of the parent.
func overflowFilter(parentID any) bson.D {
	return bson.D{{Key: fParent, Value: parentID}}
}

// overflowOrder sorts a parent's overflow documents in append order.
var overflowOrder = bson.D{{Key: fSeq, Value: 1}}

// overflowPageFilter matches the parent's overflow documents from seq
// `from` on: a page of Page, sorted by seq, served by the unique {parent,
// seq} index.
func overflowPageFilter(parentID any, from int64) bson.D {
	return bson.D{{Key: fParent, Value: parentID}, {Key: fSeq, Value: bson.D{{Key: "$gte", Value: from}}}}
}

// overflowPageProjection reads the seq and the items of an overflow
// document: where Page's next page starts, where Items skips a document
// returned again, and what they yield.
var overflowPageProjection = bson.D{{Key: "_id", Value: 0}, {Key: fSeq, Value: 1}, {Key: fItems, Value: 1}}

// overflowItemsProjection reads only the items of overflow documents.
var overflowItemsProjection = bson.D{{Key: "_id", Value: 0}, {Key: fItems, Value: 1}}

// embeddedProjection is what Items and Page read of the parent: its
// array and its flag.
func (r *Repo[P, I]) embeddedProjection() bson.D {
	return bson.D{{Key: r.cfg.Field, Value: 1}, {Key: r.cfg.FlagField, Value: 1}}
}

// flagProjection is what Page reads of the parent when its cursor is in
// an overflow document: that the parent is there, and its flag.
func (r *Repo[P, I]) flagProjection() bson.D {
	return bson.D{{Key: r.cfg.FlagField, Value: 1}}
}

// countProjection is what Count reads of the parent: the ids of its items
// (their number) and its flag.
func (r *Repo[P, I]) countProjection() bson.D {
	return bson.D{{Key: r.idPath, Value: 1}, {Key: r.cfg.FlagField, Value: 1}}
}

// countPipeline sums the counts of a parent's overflow documents.
func countPipeline(parentID any) mongo.Pipeline {
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: fParent, Value: parentID}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$" + fCount}}}}}},
	}
}

// removeParentNative removes the item from the parent's array by a $pull
// condition: one command where the server has
// [patterns.FeaturePullConditions]. The filter matches the parent while
// it holds the item or its flag is true, so that the one command also
// says whether to look in overflow: modified, the item was pulled;
// matched and not modified, the parent has overflow and not the item;
// not matched, neither (or no parent).
func (r *Repo[P, I]) removeParentNative(parentID, itemID any) (filter, update bson.D) {
	return bson.D{{Key: "_id", Value: parentID}, {Key: "$or", Value: bson.A{
			bson.D{{Key: r.idPath, Value: itemID}},
			bson.D{{Key: r.cfg.FlagField, Value: true}},
		}}},
		bson.D{{Key: "$pull", Value: bson.D{{Key: r.cfg.Field, Value: bson.D{{Key: r.cfg.IDField, Value: itemID}}}}}}
}

// removeOverflowNative removes the item from the overflow document holding
// it, every copy of it, and lowers its count by the number of copies
// removed: a pipeline update whose one $set computes both from the
// document as it was, so that the count follows what was pulled (a $pull
// by id with $inc -1 would leave it one too high for good after a
// duplicate). The id is a $literal: a string id starting with "$" is not
// a field path.
func (r *Repo[P, I]) removeOverflowNative(parentID, itemID any) (filter bson.D, update mongo.Pipeline) {
	id := bson.D{{Key: "$literal", Value: itemID}}
	field := "$$this." + r.cfg.IDField
	copies := func(op string) bson.D {
		return bson.D{{Key: "$filter", Value: bson.D{
			{Key: "input", Value: "$" + fItems},
			{Key: "cond", Value: bson.D{{Key: op, Value: bson.A{field, id}}}},
		}}}
	}
	return bson.D{{Key: fParent, Value: parentID}, {Key: r.itemsIDPath, Value: itemID}},
		mongo.Pipeline{{{Key: "$set", Value: bson.D{
			{Key: fCount, Value: bson.D{{Key: "$subtract", Value: bson.A{"$" + fCount, bson.D{{Key: "$size", Value: copies("$eq")}}}}}},
			{Key: fItems, Value: copies("$ne")},
		}}}}
}

// arrayProjection is what Append reads of a parent whose array it could
// not create: its array, to tell a value of another type from an array a
// concurrent Append created first.
func (r *Repo[P, I]) arrayProjection() bson.D {
	return bson.D{{Key: r.cfg.Field, Value: 1}}
}

// holderFilter matches the overflow document of the parent holding the
// item; holderProjection reads its items.
func (r *Repo[P, I]) holderFilter(parentID, itemID any) bson.D {
	return bson.D{{Key: fParent, Value: parentID}, {Key: r.itemsIDPath, Value: itemID}}
}

var holderProjection = bson.D{{Key: fItems, Value: 1}}

// removeParentPortable removes the given elements of the parent's array,
// compared whole (read first: without [patterns.FeaturePullConditions],
// $pull matches values exactly). The filter requires the elements as
// read ($all, compared whole too), so that a removal that lost a race, to
// a Remove or to an Update that rewrote an element, matches nothing
// rather than pulling nothing from a document it matched.
func (r *Repo[P, I]) removeParentPortable(parentID any, elems bson.A) (filter, update bson.D) {
	return bson.D{{Key: "_id", Value: parentID}, {Key: r.cfg.Field, Value: bson.D{{Key: "$all", Value: elems}}}},
		bson.D{{Key: "$pullAll", Value: bson.D{{Key: r.cfg.Field, Value: elems}}}}
}

// removeOverflowPortable removes the given elements, compared whole, from
// the overflow document docID and lowers its count by their number; the
// filter requires the elements as read, as [Repo.removeParentPortable]'s
// does, so that a removal that lost a race lowers no count.
func (r *Repo[P, I]) removeOverflowPortable(docID any, elems bson.A) (filter, update bson.D) {
	return bson.D{{Key: "_id", Value: docID}, {Key: fItems, Value: bson.D{{Key: "$all", Value: elems}}}},
		bson.D{
			{Key: "$pullAll", Value: bson.D{{Key: fItems, Value: elems}}},
			{Key: "$inc", Value: bson.D{{Key: fCount, Value: int64(-len(elems))}}},
		}
}

// seqIndexKeys and itemIndexKeys are the keys of the indexes of
// [Repo.Indexes].
func seqIndexKeys() bson.D {
	return bson.D{{Key: fParent, Value: 1}, {Key: fSeq, Value: 1}}
}

func (r *Repo[P, I]) itemIndexKeys() bson.D {
	return bson.D{{Key: fParent, Value: 1}, {Key: r.itemsIDPath, Value: 1}}
}

// updateProjection is what Update reads of a parent: its array and its
// flag where the server checks the size; the whole parent elsewhere,
// whose size Update needs.
func (r *Repo[P, I]) updateProjection(p plan) bson.D {
	if !p.serverSizeLimit {
		return nil
	}
	return r.embeddedProjection()
}

// updateParentFilter matches the parent while it holds old, the element
// Update read at index i of its array of n items (see [elementGuard]).
func (r *Repo[P, I]) updateParentFilter(p plan, parentID any, i int, old bson.RawValue, n int) bson.D {
	return append(bson.D{{Key: "_id", Value: parentID}}, elementGuard(p, r.cfg.Field, i, n, old)...)
}

// updateParentUpdate replaces old, the element Update read at index i of
// the parent's array, with the item (see [elementSet]).
func (r *Repo[P, I]) updateParentUpdate(p plan, i int, old bson.RawValue, it item) (update bson.D, arrayFilters []any) {
	path, af := elementSet(p, r.cfg.Field, i, old)
	return bson.D{{Key: "$set", Value: bson.D{{Key: path, Value: it.raw}}}}, af
}

// elementGuard is the condition of Update's write of the element it read,
// old, at index i of the array at path field, of n elements: what makes
// a concurrent Remove (which shifts the elements), Update of the item,
// or Append (which changes the size Update checked, where it checks it)
// make the write match nothing. Where the write names the element by its
// value (see [elementSet]), that the array holds old ({field: {$eq: old}},
// exact: no index in the path). Elsewhere, the element at index i is old
// and the array holds the n elements read. The path field.<i> alone is
// not exact: MongoDB reads it also as the field named i of any element,
// and, where that field holds a list, as any element of the list
// (mongodb/mongo src/mongo/db/matcher/path_test.cpp, ArrayIndex3; the
// manual, "Query an Array"), so an item holding under "<i>" a copy of
// old, or a list with one, would let it match after a Remove shifted the
// elements; {$size: n} makes a Remove alone miss it.
func elementGuard(p plan, field string, i, n int, old bson.RawValue) bson.D {
	if p.arrayFilters {
		return bson.D{{Key: field, Value: bson.D{{Key: "$eq", Value: old}}}}
	}
	return bson.D{{Key: field + "." + strconv.Itoa(i), Value: old}, {Key: field, Value: sizeIs(n)}}
}

// elementSet returns the path that Update's $set writes the item to, in
// place of old, the element it read at index i of the array at path
// field, and the arrayFilters that path needs: where the server has
// [patterns.FeatureArrayFilters], every element equal to old, by value
// ({e: {$eq: old}}), wherever a concurrent write moved it; elsewhere the
// element at index i.
func elementSet(p plan, field string, i int, old bson.RawValue) (path string, arrayFilters []any) {
	if p.arrayFilters {
		return field + ".$[e]", []any{bson.D{{Key: "e", Value: bson.D{{Key: "$eq", Value: old}}}}}
	}
	return field + "." + strconv.Itoa(i), nil
}

// holderUpdateProjection is what Update reads of the overflow document
// holding the item: its seq (to name it in the write, with the parent: the
// shard key), its bytes and its items.
var holderUpdateProjection = bson.D{{Key: fSeq, Value: 1}, {Key: fBytes, Value: 1}, {Key: fItems, Value: 1}}

// updateOverflowFilter matches the overflow document seq of the parent
// while it holds old, the element Update read at index i of its n items
// (see [elementGuard]), and, when the item grows by delta > 0 bytes,
// while its bytes leave room for them within budget.
func updateOverflowFilter(p plan, parentID any, seq int64, i, n int, old bson.RawValue, delta, budget int) bson.D {
	f := append(bson.D{{Key: fParent, Value: parentID}, {Key: fSeq, Value: seq}}, elementGuard(p, fItems, i, n, old)...)
	if delta > 0 {
		f = append(f, bson.E{Key: fBytes, Value: bson.D{{Key: "$lte", Value: int64(budget - delta)}}})
	}
	return f
}

// updateOverflowUpdate replaces old, the element Update read at index i
// of an overflow document (see [elementSet]), with the item and changes
// its bytes by delta, the difference in size between the item and old.
func updateOverflowUpdate(p plan, i int, old bson.RawValue, it item, delta int) (update bson.D, arrayFilters []any) {
	path, af := elementSet(p, fItems, i, old)
	return bson.D{
		{Key: "$set", Value: bson.D{{Key: path, Value: it.raw}}},
		{Key: "$inc", Value: bson.D{{Key: fBytes, Value: int64(delta)}}},
	}, af
}

// updateParentNative replaces the item in the parent's array by its id,
// every element holding it: an arrayFilters update, one command where
// the server has [patterns.FeatureArrayFilters] (and refuses a parent
// past 16 MiB itself). The filter matches the parent while it holds no
// element equal to the item and holds the item or has its flag true, so
// that the one command also says where to look next: modified, the item
// was replaced; matched and not modified, the parent has overflow and not
// the item; not matched, the parent holds the item as given, or neither
// the item nor overflow, or does not exist (read it). It also requires an
// element in the array (Field.0 exists: an element with a field "0" is
// one too): on an empty array FerretDB 2.7 writes [null] for
// {$set: {Field.$[e]: item}} and answers that it modified the parent
// (MongoDB modifies nothing), and on a null or missing one the server
// refuses the update; a closed parent whose array is empty is read, as
// one that does not match. Its parts are encoded here, in one buffer: it
// is Update's hot path, where bson.D values cost 21 allocations to build
// and the driver's encoding of them more (159 allocations an Update
// against 136 by hand, 2026-12-03). All but the parent's id: that stays
// the caller's value, in the filter's bson.D, for the driver to encode
// with the database's registry as every other filter of the repository
// carries it (an id type the application's registry encodes otherwise,
// a UUID as binary subtype 4, must reach the same parent everywhere:
// attack60_test.go).
func (r *Repo[P, I]) updateParentNative(parentID any, it item) (filter bson.D, update bson.Raw, arrayFilters []any) {
	b := make([]byte, 0, 96+2*len(it.id.Value)+2*len(it.raw)+
		len(r.idPath)+len(r.cfg.FlagField)+len(r.setByID)+len(r.byIDFilter))
	id := bsoncore.Value{Type: bsoncore.Type(it.id.Type), Data: it.id.Value}
	or, b := bsoncore.AppendArrayStart(b)
	clause, b := bsoncore.AppendDocumentElementStart(b, "0")
	b = bsoncore.AppendValueElement(b, r.idPath, id)
	b, _ = bsoncore.AppendDocumentEnd(b, clause)
	clause, b = bsoncore.AppendDocumentElementStart(b, "1")
	b = bsoncore.AppendBooleanElement(b, r.cfg.FlagField, true)
	b, _ = bsoncore.AppendDocumentEnd(b, clause)
	b, _ = bsoncore.AppendArrayEnd(b, or)
	n := len(b)
	ne, b := bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendDocumentElement(b, "$ne", it.raw)
	b, _ = bsoncore.AppendDocumentEnd(b, ne)
	filter = bson.D{
		{Key: "_id", Value: parentID},
		{Key: "$or", Value: bsoncore.Array(b[:n:n])},
		{Key: r.cfg.Field, Value: bson.Raw(b[n:len(b):len(b)])},
		{Key: r.elementPath(0), Value: exists},
	}

	n = len(b)
	doc, b := bsoncore.AppendDocumentStart(b)
	set, b := bsoncore.AppendDocumentElementStart(b, "$set")
	b = bsoncore.AppendDocumentElement(b, r.setByID, it.raw)
	b, _ = bsoncore.AppendDocumentEnd(b, set)
	b, _ = bsoncore.AppendDocumentEnd(b, doc)
	update = b[n:len(b):len(b)]

	n = len(b)
	doc, b = bsoncore.AppendDocumentStart(b)
	b = bsoncore.AppendValueElement(b, r.byIDFilter, id)
	b, _ = bsoncore.AppendDocumentEnd(b, doc)
	return filter, update, []any{bson.Raw(b[n:])}
}
