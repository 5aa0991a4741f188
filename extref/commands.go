package extref

import (
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/shard"
)

// This file builds every filter, update, projection and pipeline the
// package sends, as pure functions of their inputs.

// byID is the filter of one document by _id: {_id: id}.
func byID(id any) bson.D { return bson.D{{Key: "_id", Value: id}} }

// keyed is the filter of Update's findAndModify on a source sharded on
// key, read as doc: its _id and each key field's value by equality,
// {_id: id, region: {$eq: "eu"}} (null for a field doc lacks), which
// mongos routes to one shard.
func keyed(id any, doc bson.Raw, key []string) bson.D {
	return shard.AppendValues(byID(id), doc, key)
}

// sourceUpdate is the options Update gives the source's findAndModify
// after the caller's, which it overrides: return the document after the
// update, projected on the copied fields where the plan allows it, else
// whole (no projection, so that a caller's cannot hide a copied field).
func sourceUpdate(p plan, proj bson.D) *options.FindOneAndUpdateOptionsBuilder {
	o := options.FindOneAndUpdate().SetReturnDocument(options.After)
	if p.projectUpdate {
		return o.SetProjection(proj)
	}
	return o.SetProjection(nil)
}

// transactionOptions are the options of Update's transaction: its commit
// waits for a majority of the replica set (or of each shard's), so that a
// committed Update survives a failover, whatever the client's write
// concern.
func transactionOptions() *options.TransactionOptionsBuilder {
	return options.Transaction().SetWriteConcern(writeconcern.Majority())
}

// fieldsOnly is the projection of a document on the given fields: the
// copied fields of a source, {name: 1, email: 1}, or its shard key's
// (Config.ShardKey), {region: 1}. The _id comes with it.
func fieldsOnly(fields []string) bson.D {
	proj := make(bson.D, len(fields))
	for i, f := range fields {
		proj[i] = bson.E{Key: f, Value: 1}
	}
	return proj
}

// sourcesByID is the filter of the sources with the given ids:
// {_id: {$in: [ids...]}}.
func sourcesByID(ids bson.A) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
}

// indexKeys are the keys of the index a target's queries use: the copy's
// id, {customer.id: 1} or {items.product.id: 1} (multikey).
func indexKeys(p copyPath, ct copyType) bson.D {
	return bson.D{{Key: join(p.inDocument(), ct.id), Value: 1}}
}

// fieldPaths are the paths of a copy's id and copied fields under one
// prefix, joined once when the repository is built.
type fieldPaths struct {
	id     string
	fields []string // in the order of copyType.fields
}

func pathsAt(prefix string, ct copyType) fieldPaths {
	fp := fieldPaths{id: join(prefix, ct.id), fields: make([]string, len(ct.fields))}
	for i, f := range ct.fields {
		fp.fields[i] = join(prefix, f)
	}
	return fp
}

// targetPaths are the paths a target's commands name.
type targetPaths struct {
	// match: the copy as the sync's filter sees it, in the document
	// ("customer") or, inside $elemMatch, in the array element ("product").
	match fieldPaths
	// set: the copy as the sync's update writes it: "customer", or
	// "items.$[e].product".
	set fieldPaths
	// array: the array holding the copies; "" for a single copy.
	array string
	// elemID: the array filter's field, "e.product.id".
	elemID string
	// holder: the copy's id from the document's root, "items.product.id".
	holder string
}

// elem is the identifier of the array filter of an array target's update.
const elem = "e"

// pathsOf joins the paths of target path p's commands.
func pathsOf(p copyPath, ct copyType) targetPaths {
	tp := targetPaths{match: pathsAt(p.copy, ct), set: pathsAt(p.copy, ct), array: p.array, holder: join(p.inDocument(), ct.id)}
	if p.array != "" {
		tp.set = pathsAt(join(p.array, "$["+elem+"]", p.copy), ct)
		tp.elemID = join(elem, p.copy, ct.id)
	}
	return tp
}

// staleCond returns the query condition that selects the copies of c, at
// the paths at, that differ from c in at least one field:
//
//	{<prefix>.<id>: id, $or: [<clauses of f>, ..., <clauses of g>]}
//
// with the clauses of [staleClauses] for each copied field. Fields are
// compared one by one rather than the copy as a whole, because a whole
// embedded document compares field order too and may carry other fields.
func staleCond(at fieldPaths, ct copyType, c copyValue) bson.D {
	var or bson.A
	for i, f := range ct.fields {
		or = staleClauses(or, at.fields[i], c.want(f))
	}
	return bson.D{{Key: at.id, Value: c.id}, {Key: "$or", Value: or}}
}

// staleClauses appends to or the clauses that select a value at path
// that differs from want as a whole, the comparison of [stale]:
//
//   - want omitted (Type 0): {path: {$exists: true}};
//   - want an array of n elements: {path: {$not: {$type: "array"}}},
//     {path.<n>: {$exists: true}} and, when n > 0,
//     {path.<n-1>: {$exists: false}} (not an array of n elements), then
//     the clauses of each element at path.<i>;
//   - any other want: {path: {$ne: want}} and {path: {$type: "array"}}.
//
// {path: {$ne: want}} alone does not do: MongoDB's equality matches an
// array that holds an element equal to want, so a copy ["a", "b"] of a
// source whose field became "a" would never be selected. The array clause
// selects it, and the per-element clauses do the same for arrays in
// arrays. Numbers still compare by value, whatever their BSON type. The
// length is checked by the elements' positions rather than with $size,
// which FerretDB 2.x gets silently wrong inside $elemMatch (it matches no
// array there), where array targets' filters use it.
func staleClauses(or bson.A, path string, want bson.RawValue) bson.A {
	switch want.Type {
	case 0:
		return append(or, bson.D{{Key: path, Value: bson.D{{Key: "$exists", Value: true}}}})
	case bson.TypeArray:
		vals, _ := want.Array().Values() // S's own encoding: well formed
		or = append(or,
			bson.D{{Key: path, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}}},
			bson.D{{Key: join(path, strconv.Itoa(len(vals))), Value: bson.D{{Key: "$exists", Value: true}}}})
		if len(vals) > 0 {
			or = append(or, bson.D{{Key: join(path, strconv.Itoa(len(vals)-1)), Value: bson.D{{Key: "$exists", Value: false}}}})
		}
		for i, v := range vals {
			or = staleClauses(or, join(path, strconv.Itoa(i)), v)
		}
		return or
	}
	return append(or,
		bson.D{{Key: path, Value: bson.D{{Key: "$ne", Value: want}}}},
		bson.D{{Key: path, Value: bson.D{{Key: "$type", Value: "array"}}}})
}

// setCopy returns the update that makes the copy at the paths at equal to
// c: {$set: {<prefix>.<f>: v, ...}, $unset: {<prefix>.<g>: ""}}, each
// operator only when it has fields. The id is not written: the filter
// matched it.
func setCopy(at fieldPaths, ct copyType, c copyValue) bson.D {
	set, unset := make(bson.D, 0, len(ct.fields)), bson.D(nil)
	for i, f := range ct.fields {
		if v := c.want(f); v.Type != 0 {
			set = append(set, bson.E{Key: at.fields[i], Value: v})
		} else {
			unset = append(unset, bson.E{Key: at.fields[i], Value: ""})
		}
	}
	u := make(bson.D, 0, 2)
	if len(set) > 0 {
		u = append(u, bson.E{Key: "$set", Value: set})
	}
	if len(unset) > 0 {
		u = append(u, bson.E{Key: "$unset", Value: unset})
	}
	return u
}

// syncMany is the one updateMany that syncs a target where the plan does
// not take the portable path.
type syncMany struct {
	filter       bson.D
	update       bson.D
	arrayFilters []any // nil for a single embedded document
}

// syncMany builds the updateMany of the target.
//
// A single embedded document ("customer"):
//
//	filter {customer.id: id, $or: [{customer.name: {$ne: name}}, ...]}
//	update {$set: {customer.name: name, ...}}
//
// Copies in array elements ("items[].product"): the filter selects the
// documents with at least one stale copy of the source, and the array
// filter every copy of the source in them:
//
//	filter       {items: {$elemMatch: {product.id: id, $or: [{product.name: {$ne: name}}, ...]}}}
//	update       {$set: {items.$[e].product.name: name, ...}}
//	arrayFilters [{e.product.id: id}]
//
// The array filter holds no $or: FerretDB 2.x refuses a logical operator
// at the top of an array filter (MongoDB accepts it), and this form runs
// on both. A copy that already equals the source, in a document that also
// holds a stale one, is set to the values it holds: MongoDB counts the
// document modified once either way, and a document whose copies are all
// fresh is not matched, so Matched and Modified still count the documents
// that held stale copies.
func (tp targetPaths) syncMany(ct copyType, c copyValue) syncMany {
	if tp.array == "" {
		return syncMany{filter: staleCond(tp.match, ct, c), update: setCopy(tp.set, ct, c)}
	}
	return syncMany{
		filter:       bson.D{{Key: tp.array, Value: bson.D{{Key: "$elemMatch", Value: staleCond(tp.match, ct, c)}}}},
		update:       setCopy(tp.set, ct, c),
		arrayFilters: []any{bson.D{{Key: tp.elemID, Value: c.id}}},
	}
}

// holders returns the filter that selects every document holding a copy
// of c, stale or not: {items.product.id: id}. The portable array path
// starts from it, because FerretDB 1.x rejects $elemMatch on the fields of
// array elements, so the stale elements are found in Go.
func (tp targetPaths) holders(c copyValue) bson.D {
	return bson.D{{Key: tp.holder, Value: c.id}}
}

// arrayOnly is the projection of a target document on p's array:
// {items: 1}.
func (p copyPath) arrayOnly() bson.D { return bson.D{{Key: p.array, Value: 1}} }

// rewrite returns the update of one document of an array target that the
// portable path sends: it sets the stale copies of c in the array arr by
// their indexes, each guarded by its whole value as read, so that an
// element that moved, was removed or was rewritten since arr was read
// makes the update match nothing instead of writing the wrong element. A
// guard on the copy's id alone does not do: two copies of one source in
// one array that swap places would each pass the other's guard, and the
// update would rewrite the fresh copy and leave the stale one:
//
//	filter {_id: docID, items.3.product: {id: id, name: old, ...}, ...}
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
		if !isCopy || !bsonid.Equal(lookup(cp, ct.id), c.id) {
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
			filter = append(filter, bson.E{Key: at, Value: cp})
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

// withCopies is the filter of Verify's scan of a target: the documents
// where the copy's path holds something, {customer: {$exists: true}} or
// {items.product: {$exists: true}}, so that copies without an id are read
// (and counted as orphans) too.
func (p copyPath) withCopies() bson.D {
	return bson.D{{Key: p.inDocument(), Value: bson.D{{Key: "$exists", Value: true}}}}
}

// copiesOnly is the projection of a target document on its copies:
// {customer: 1} or {items.product: 1}.
func (p copyPath) copiesOnly() bson.D { return bson.D{{Key: p.inDocument(), Value: 1}} }

// changes is the pipeline of Watch's change stream: the inserts, updates
// and replacements of source documents, and the invalidate event that ends
// the stream, projected on what Watch reads, the names of an update's
// changed fields instead of their values (a replacement's whole document
// is left out: an event past 16 MiB fails with BSONObjectTooLarge). The
// event's _id, its resume token, is kept, as MongoDB requires.
//
//	[{$match: {operationType: {$in: ["insert", "update", "replace", "invalidate"]}}},
//	 {$project: {operationType: 1, documentKey: 1,
//	             updatedFields: {$map: {input: {$objectToArray: "$updateDescription.updatedFields"}, in: "$$this.k"}},
//	             updateDescription.removedFields: 1, updateDescription.truncatedArrays: 1}}]
func changes() bson.A {
	return bson.A{
		bson.D{{Key: "$match", Value: bson.D{
			{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace", "invalidate"}}}},
		}}},
		bson.D{{Key: "$project", Value: bson.D{
			{Key: "operationType", Value: 1},
			{Key: "documentKey", Value: 1},
			{Key: "updatedFields", Value: bson.D{{Key: "$map", Value: bson.D{
				{Key: "input", Value: bson.D{{Key: "$objectToArray", Value: "$updateDescription.updatedFields"}}},
				{Key: "in", Value: "$$this.k"},
			}}}},
			{Key: "updateDescription.removedFields", Value: 1},
			{Key: "updateDescription.truncatedArrays", Value: 1},
		}}},
	}
}

// saveToken is the update of [TokenCollection.SaveToken]:
// {$set: {token: token, savedAt: now}}, sent with upsert.
func saveToken(token bson.Raw, now time.Time) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: token}, {Key: "savedAt", Value: now}}}}
}
