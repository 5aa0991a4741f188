// Package keyset reads documents in the order of their _id, a page per
// find: {_id: {$gt: last}} sorted by _id, with a limit. Unlike one long
// cursor, such a scan returns each document once while others rewrite the
// documents it reads (a cursor may return an updated document again:
// FerretDB 2.x does, and MongoDB can when an update moves a document's
// index entry ahead of the cursor), its memory is bounded by a page, and
// whatever the caller writes between pages is never read again.
//
// The order is the server's sort order of BSON values (the manual's
// "Comparison/Sort Order"; MongoDB's canonicalizeBSONType): MinKey,
// undefined, null, numbers (by value, NaN first), strings and symbols,
// documents, binary data, ObjectIDs, booleans, dates, timestamps, regular
// expressions, DBPointers, JavaScript, JavaScript with scope, MaxKey. A
// scan yields each document stored before it starts, and still there
// when its place is read, once, whatever its _id's value (but for an _id
// that no MongoDB stores: see [After]). Numbers equal
// in value are one _id to the server's unique index (int32 7, int64 7,
// 7.0 and the decimal 7; -0 and 0; the double and the decimal NaN), as a
// string and a symbol of the same bytes are, so no two documents tie.
package keyset

import (
	"context"
	"iter"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// place is a place in the server's sort order: the BSON types that sort
// there, compared by value with each other, and the $type alias that
// names them.
type place struct {
	types []bson.Type
	alias string
	// common: every server names the place in $type. FerretDB 1.x knows
	// no other alias (it answers BadValue to "minKey", "symbol",
	// "javascript"... and cannot store such values).
	common bool
}

// order is the server's sort order of the BSON types. Symbols sort with
// the strings but are a type of their own to $type, and so have no place
// here: see [rank] and [After]. Arrays are no _id and, as sort values,
// sort by an element: they have no place either.
var order = []place{
	{[]bson.Type{bson.TypeMinKey}, "minKey", false},
	{[]bson.Type{bson.TypeUndefined}, "undefined", false},
	{[]bson.Type{bson.TypeNull}, "null", true},
	{[]bson.Type{bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128}, "number", true},
	{[]bson.Type{bson.TypeString}, "string", true},
	{[]bson.Type{bson.TypeEmbeddedDocument}, "object", true},
	{[]bson.Type{bson.TypeBinary}, "binData", true},
	{[]bson.Type{bson.TypeObjectID}, "objectId", true},
	{[]bson.Type{bson.TypeBoolean}, "bool", true},
	{[]bson.Type{bson.TypeDateTime}, "date", true},
	{[]bson.Type{bson.TypeTimestamp}, "timestamp", true},
	{[]bson.Type{bson.TypeRegex}, "regex", false},
	{[]bson.Type{bson.TypeDBPointer}, "dbPointer", false},
	{[]bson.Type{bson.TypeJavaScript}, "javascript", false},
	{[]bson.Type{bson.TypeCodeWithScope}, "javascriptWithScope", false},
	{[]bson.Type{bson.TypeMaxKey}, "maxKey", false},
}

// After returns the condition of the documents whose _id the server
// sorts after last. {_id: {$gt: last}} alone compares values of last's
// type only (numbers count as one type), so the types sorted after it
// are added: {$or: [{_id: {$gt: last}}, {_id: {$gte: ""}}, {_id: {$type:
// [...]}}]}, where {$gte: ""} reaches the strings and the symbols (which
// {$type: "string"} misses). After a NaN, which sorts before every other
// number and above which $gt finds none, the numbers are {$gte:
// -Infinity}. The $type list names the types every server names (null,
// "number", documents, binary data, ObjectIDs, booleans, dates,
// timestamps) and, when all is true, the others (undefined, regular
// expressions, DBPointers, JavaScript, MaxKey), which only a server that
// stores such values can name. An _id that no scan can page past (a
// regular expression, undefined, an array: MongoDB stores none as an _id)
// is an error wrapping patterns.ErrInvalid that names it. It sends
// nothing.
func After(last bson.RawValue, all bool) (bson.D, error) {
	r := rank(last.Type)
	if r < 0 || last.Type == bson.TypeRegex || last.Type == bson.TypeUndefined {
		return nil, errs.Invalid("_id %s: a scan in _id order cannot continue after a %s", bsonid.Text(last), last.Type)
	}
	var or bson.A
	switch {
	case last.Type == bson.TypeMinKey || last.Type == bson.TypeMaxKey:
		// The only value of its type.
	case bsonid.IsNaN(last):
		or = append(or, gte(math.Inf(-1)))
	default:
		or = append(or, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}}})
	}
	var later bson.A
	for i, p := range order[r+1:] {
		switch {
		case r+1+i == stringRank:
			or = append(or, gte(""))
		case p.common || all:
			later = append(later, p.alias)
		}
	}
	if len(later) > 0 {
		or = append(or, bson.D{{Key: "_id", Value: bson.D{{Key: "$type", Value: later}}}})
	}
	switch len(or) {
	case 0:
		// After MaxKey: nothing.
		return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{}}}}}, nil
	case 1:
		return or[0].(bson.D), nil
	}
	return bson.D{{Key: "$or", Value: or}}, nil
}

// gte is {_id: {$gte: v}}.
func gte(v any) bson.D { return bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: v}}}} }

// stringRank is the place of the strings (and the symbols) in order.
var stringRank = rank(bson.TypeString)

// Ordered reports whether t has a place in the order of types that every
// server names in $type (null, numbers, strings, documents, binary data,
// ObjectIDs, booleans, dates and timestamps), which [TypesThrough] places.
func Ordered(t bson.Type) bool {
	r := rank(t)
	return r >= 0 && order[r].common && t != bson.TypeSymbol
}

// rank returns the place of t in order, symbols at the strings'; -1 for
// a type with no place.
func rank(t bson.Type) int {
	if t == bson.TypeSymbol {
		t = bson.TypeString
	}
	return slices.IndexFunc(order, func(p place) bool { return slices.Contains(p.types, t) })
}

// TypesThrough returns the $type aliases of the types that every server
// names and the server's sort puts at t or before it in direction dir (1
// ascending, -1 descending): {$not: {$type: TypesThrough(t, dir)}} is
// what a range operator, which compares values of one type only, cannot
// reach from a value of type t, less what it excludes: the types every
// server names and sorts after t, and also the types outside them
// (symbols, MinKey, undefined, regular expressions, DBPointers,
// JavaScript, MaxKey) and arrays, wherever they sort, which a caller that
// cannot place them must refuse when it meets them. t must be [Ordered].
// It sends nothing.
func TypesThrough(t bson.Type, dir int) bson.A {
	r := rank(t)
	var out bson.A
	for i, p := range order {
		if p.common && (i-r)*dir <= 0 {
			out = append(out, p.alias)
		}
	}
	return out
}

// Pages returns an iterator over the documents of coll that match filter
// (nil: all), in ascending _id order, in pages of at most size documents
// (size > 0), and at most limit documents in all (0: no limit). Each page
// is one find: filter for the first, {$and: [filter, After(last)]} for
// the next ones, sorted by _id, with the page's size as limit (and one
// more as batch size), so that the server answers it in one reply (more
// only when the documents pass 16 MiB). A short first page is the whole
// scan. A later short page is followed by one more find, of the greatest
// _id that matches filter: when it is of a type sorted after timestamps
// (a DBPointer, JavaScript, MaxKey), which the pages name in $type only
// once the scan has met a type outside the common ones (those
// [TypesThrough] names), the scan goes on past the last document naming
// them. opts are the caller's options, sent with every find, before the
// sort, limit, batch size (and projection, for the greatest _id) of the
// scan's own, which win.
//
// The caller may write the documents of a page before asking for the
// next one: the scan never meets them again. A full page that ends with
// a document whose _id no scan can page past (see [After]) stops the
// scan with an error wrapping patterns.ErrInvalid that names it.
// Building the iterator sends nothing; an error is yielded once, with a
// nil page, and ends the iteration. The documents are copies that stay
// valid after it moves on.
func Pages(ctx context.Context, coll *mongo.Collection, filter any, size int, limit int64, opts ...options.Lister[options.FindOptions]) iter.Seq2[[]bson.Raw, error] {
	if filter == nil {
		filter = bson.D{}
	}
	return func(yield func([]bson.Raw, error) bool) {
		f, left := filter, limit
		var last bson.RawValue
		first := true
		all := false // the server stores (and so names) the types outside the common ones
		for {
			n := int64(size)
			if limit > 0 {
				n = min(n, left)
			}
			// A batch size one over the limit: FerretDB 1.x keeps the
			// cursor open after a batch the size of the limit, and the
			// driver then sends a getMore that returns nothing.
			page := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(n).SetBatchSize(int32(min(n+1, math.MaxInt32)))
			docs, err := read(ctx, coll, f, append(slices.Clone(opts), page))
			if err != nil {
				yield(nil, err)
				return
			}
			for _, d := range docs {
				all = all || !Ordered(d.Lookup("_id").Type)
			}
			if len(docs) > 0 && !yield(docs, nil) {
				return
			}
			if left -= int64(len(docs)); limit > 0 && left == 0 {
				return
			}
			if len(docs) > 0 {
				last = docs[len(docs)-1].Lookup("_id")
			}
			if int64(len(docs)) < n {
				if first || all {
					return
				}
				// The common $type aliases reach every type up to
				// timestamps: what sorts later is seen by its greatest.
				greatest := options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(1).SetBatchSize(2).SetProjection(bson.D{{Key: "_id", Value: 1}})
				top, err := read(ctx, coll, filter, append(slices.Clone(opts), greatest))
				if err != nil {
					yield(nil, err)
					return
				}
				if len(top) == 0 || rank(top[0].Lookup("_id").Type) <= rank(bson.TypeTimestamp) {
					return
				}
				all = true
			}
			after, err := After(last, all)
			if err != nil {
				yield(nil, err)
				return
			}
			f, first = bson.D{{Key: "$and", Value: bson.A{filter, after}}}, false
		}
	}
}

// read returns every document of one find, as copies.
// Its commands count in the operation of ctx, if any.
func read(ctx context.Context, coll *mongo.Collection, filter any, opts []options.Lister[options.FindOptions]) ([]bson.Raw, error) {
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := coll.Find(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	defer obs.Close(context.WithoutCancel(ctx), op, cur)
	var docs []bson.Raw
	for obs.Next(ctx, op, cur) {
		docs = append(docs, slices.Clone(cur.Current))
	}
	return docs, cur.Err()
}
