package outlier

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/pagetoken"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// maxLimit is the largest page [Repo.Page] returns.
const maxLimit = 1 << 20

// Page returns up to limit items of the parent that come after the cursor
// in append order (the embedded items, then those of the overflow
// documents by seq: the order of [Repo.Get] and [Repo.Items]), from the
// first when after is the zero Cursor, and the cursor to pass for the
// next page, which is the zero Cursor when there is none.
//
// The cursor holds the place of the page's last item: the document
// holding it (the parent or an overflow document's seq), its index there
// and its id. So a page costs what the first one costs, however deep:
//   - a page that starts in the parent (the first, and those whose cursor
//     is there) reads the parent's array and flag (1 findOne), and when
//     the parent holds the whole page, that is all: 1 command. When the
//     page runs past the parent's items into overflow, 1 find more (as
//     below);
//   - a page whose cursor is in an overflow document reads the parent's
//     flag (1 findOne by _id, not its items), then the documents from
//     the cursor's on by the {parent, seq} index ({parent, seq: {$gte:
//     seq}} sorted by seq, as many documents as the page can need at
//     OverflowCap items each, with that limit, so that the server
//     answers in one reply): 2 commands, never a read of the parent's
//     items or of the documents before the cursor's.
//
// That is all while the documents a page reads hold OverflowCap items
// each. Documents that hold fewer (the last one, and those [Repo.Remove]
// thinned or emptied) make the page send a find more for the documents
// after them, each asking for twice as many documents as the one before
// (or as many as the items still missing need at OverflowCap each, if
// more), until the page is full or the documents end: a page whose
// overflow items lie in d documents sends at most 2 + log2(d) finds of
// the overflow, the last of which may find nothing (a page that ends
// where the items end: it cannot know they end there before it asks).
//
// Within its document the next page starts after the cursor's item,
// found by its id, so items appended or removed elsewhere meanwhile are
// neither skipped nor repeated (appended items come after it, in append
// order). If the cursor's item itself was removed, the next page starts at
// its index: an item removed before it in the same document at the same
// time makes the page skip one item. A page is not a snapshot: between its
// two commands, as for Get. A page that fills up from the parent's items
// ends with a cursor when the parent is overflowed, without reading the
// overflow: the next page can then be empty, with the zero Cursor, when
// every overflow item was removed.
//
// A cursor is bound to its parent and repository: on another parent (the
// parent 7 and the parent 7.0 are one), or in another repository, it is
// [patterns.ErrInvalid], with nothing sent. A limit outside 1 to 1<<20
// is [patterns.ErrInvalid]; a missing parent is [patterns.ErrNotFound]
// on every page, whatever its cursor: once [Repo.Delete] has deleted the
// parent (between its two commands too), the overflow documents left are
// never read. A cursor in overflow on a parent that has none (deleted and
// inserted again) gives an empty page and the zero Cursor. It takes the
// same path on every server.
func (r *Repo[P, I]) Page(ctx context.Context, parentID any, after Cursor, limit int) (_ []I, _ Cursor, err error) {
	ctx, op := r.start(ctx, "Page")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return nil, Cursor{}, pkg.Wrap("Page", err)
	}
	if err := validParent("Page", parentID); err != nil {
		return nil, Cursor{}, err
	}
	if limit < 1 || limit > maxLimit {
		return nil, Cursor{}, fail("Page", parentID, errs.Invalid("limit %d; want 1 to %d", limit, maxLimit))
	}
	out, next, err := r.page(ctx, parentID, after, limit)
	if err != nil {
		return nil, Cursor{}, fail("Page", parentID, err)
	}
	return out, next, nil
}

func (r *Repo[P, I]) page(ctx context.Context, parentID any, after Cursor, limit int) ([]I, Cursor, error) {
	scope, err := r.scope(parentID)
	if err != nil {
		return nil, Cursor{}, err
	}
	if !after.IsZero() && !bytes.Equal(after.scope, scope) {
		return nil, Cursor{}, errs.Invalid("cursor %s: a place in another parent's items or another repository's", after)
	}
	pg := pager[I]{idField: r.cfg.IDField, limit: limit, scope: scope, out: make([]I, 0, min(limit, 64))}
	inParent := after.IsZero() || after.seq < 0
	projection := r.embeddedProjection()
	if !inParent {
		projection = r.flagProjection()
	}
	parent, err := r.findParent(ctx, parentID, projection)
	if err != nil {
		return nil, Cursor{}, err
	}
	if inParent {
		arr, err := r.array(parent)
		if err != nil {
			return nil, Cursor{}, err
		}
		vals, err := arr.Values()
		if err != nil {
			return nil, Cursor{}, err
		}
		if err := pg.add(-1, vals, after); err != nil {
			return nil, Cursor{}, err
		}
		if len(pg.out) == limit && r.flagged(parent) && pg.next.IsZero() {
			pg.next = pg.last // the page ends with the parent's last item
		}
	}
	if !r.flagged(parent) || len(pg.out) == limit {
		return pg.out, pg.next, nil
	}
	if err := r.overflowPage(ctx, parentID, after, &pg); err != nil {
		return nil, Cursor{}, err
	}
	return pg.out, pg.next, nil
}

// scope is the [pagetoken.Scope] of the parent's items in this
// repository: its database, parents collection, array field and overflow
// collection, so that two repositories over one parents collection (two
// arrays of a parent) take no cursor of each other.
func (r *Repo[P, I]) scope(parentID any) ([]byte, error) {
	t, data, err := bson.MarshalValue(parentID)
	if err != nil {
		return nil, errs.Invalid("parent id: %v", err)
	}
	return pagetoken.Scope(bson.RawValue{Type: t, Value: data}, r.parents.Database().Name(), r.parents.Name(), r.cfg.Field, r.overflow.Name()), nil
}

// overflowPage adds to the page the overflow items after the cursor (all
// of them from the first document when the cursor is in the parent), a
// find of documents at a time: the first asks for as many as the page
// needs at OverflowCap items each (and the cursor's document), each next
// one for twice as many as the one before, or as many as the items still
// missing need, whichever is more.
func (r *Repo[P, I]) overflowPage(ctx context.Context, parentID any, after Cursor, pg *pager[I]) error {
	from, inOverflow := int64(0), !after.IsZero() && after.seq >= 0
	if inOverflow {
		from = after.seq
	}
	asked := 0 // documents the last find asked for
	docs := r.overflowFrom(ctx, parentID, from, func() int {
		need := pg.limit + 1 - len(pg.out) // the page's items and the one after, to know there is more
		n := (need + r.cfg.OverflowCap - 1) / r.cfg.OverflowCap
		if asked == 0 && inOverflow {
			n++ // the cursor's document is partly read
		}
		asked = max(n, 2*asked)
		return asked
	})
	for doc, err := range docs {
		if err != nil {
			return err
		}
		seq, _ := doc.Lookup(fSeq).AsInt64OK()
		items, ok := doc.Lookup(fItems).ArrayOK()
		if !ok {
			return fmt.Errorf("overflow document %d has no items array", seq)
		}
		vals, err := items.Values()
		if err != nil {
			return err
		}
		if err := pg.add(seq, vals, after); err != nil {
			return err
		}
		if !pg.next.IsZero() {
			return nil
		}
	}
	return nil
}

// pager collects the items of a page, document by document.
type pager[I any] struct {
	idField string // Config.IDField
	limit   int
	scope   []byte // of the cursors it makes
	out     []I
	last    Cursor // the place of the last item in out
	next    Cursor // set once an item past the page is met: the page is full and there is more
}

// add adds the items vals of document seq (-1: the parent; the first of
// its items, in order) that come after the cursor, up to the page's
// limit.
func (pg *pager[I]) add(seq int64, vals []bson.RawValue, after Cursor) error {
	start := 0
	if seq == after.seq && !after.IsZero() {
		start = resume(vals, pg.idField, after)
	}
	for i := start; i < len(vals); i++ {
		if len(pg.out) == pg.limit {
			pg.next = pg.last
			return nil
		}
		doc, ok := vals[i].DocumentOK()
		if !ok {
			return fmt.Errorf("item %d of %s is a BSON %s, not a document", i, where(seq), vals[i].Type)
		}
		var it I
		if err := bson.Unmarshal(doc, &it); err != nil {
			return fmt.Errorf("decode item %d of %s: %w", i, where(seq), err)
		}
		id, err := doc.LookupErr(pg.idField)
		if err != nil {
			return fmt.Errorf("item %d of %s has no %s", i, where(seq), pg.idField)
		}
		pg.out = append(pg.out, it)
		pg.last = Cursor{seq: seq, index: int32(i), id: id, scope: pg.scope, set: true}
	}
	return nil
}

// where names the document seq (-1: the parent) in errors.
func where(seq int64) string {
	if seq < 0 {
		return "the parent"
	}
	return fmt.Sprintf("overflow document %d", seq)
}

// resume returns the index in vals (a document's items) at which a page
// after the cursor starts: after the cursor's item, found by its id (at
// its index first), or at its index when it is gone.
func resume(vals []bson.RawValue, idField string, after Cursor) int {
	idAt := func(i int) bool {
		doc, ok := vals[i].DocumentOK()
		if !ok {
			return false
		}
		id, err := doc.LookupErr(idField)
		return err == nil && bsonid.Equal(id, after.id)
	}
	at := int(after.index)
	if at < len(vals) && idAt(at) {
		return at + 1
	}
	for i := range vals {
		if idAt(i) {
			return i + 1
		}
	}
	return min(at, len(vals))
}

// overflowFrom yields the parent's overflow documents from seq `from` on,
// in seq order, their seq and items only, a find per page: {parent, seq:
// {$gte: from}} sorted by seq, with size() (at least 1) as its limit and
// one more as its batch size, so that the server answers it in one reply
// and closes the cursor; the next page starts after the last seq read. A
// short page is the last. Paging on the unique {parent, seq} key rather
// than one long cursor yields each document once while others rewrite
// them (FerretDB 2.x returns a rewritten document again on a cursor).
//
// The documents are the pages' own, valid until the iteration ends.
// Building the iterator sends nothing; an error is yielded once and ends
// it.
func (r *Repo[P, I]) overflowFrom(ctx context.Context, parentID any, from int64, size func() int) iter.Seq2[bson.Raw, error] {
	return func(yield func(bson.Raw, error) bool) {
		for {
			limit := int64(max(1, size()))
			op := patterns.OperationFrom(ctx)
			op.Sent(1)
			cur, err := r.overflow.Find(ctx, overflowPageFilter(parentID, from), options.Find().
				SetSort(overflowOrder).SetProjection(overflowPageProjection).
				SetLimit(limit).SetBatchSize(int32(min(limit+1, math.MaxInt32))))
			if err != nil {
				yield(nil, err)
				return
			}
			var docs []bson.Raw
			err = obs.All(ctx, op, cur, &docs)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, d := range docs {
				if !yield(d, nil) {
					return
				}
			}
			if int64(len(docs)) < limit {
				return
			}
			last, ok := docs[len(docs)-1].Lookup(fSeq).AsInt64OK()
			if !ok {
				yield(nil, fmt.Errorf("overflow document %v has no integer %s", docs[len(docs)-1].Lookup("_id"), fSeq))
				return
			}
			from = last + 1
		}
	}
}

// Cursor is a place in a parent's items: that of the last item of a
// page, which [Repo.Page] returns. The zero Cursor is the start. To hand
// it to a client, encode it with [Cursor.String] (or as JSON text,
// through MarshalText) and read it back with [ParseCursor]; the text is
// URL-safe and opaque to clients.
type Cursor struct {
	seq   int64         // the document holding the item: -1 the parent, else the overflow document's seq
	index int32         // the item's index in that document's array
	id    bson.RawValue // the item's id
	scope []byte        // the pagetoken.Scope of its parent's items in its repository
	set   bool          // not the zero Cursor
}

// IsZero reports whether c is the zero Cursor, the start.
func (c Cursor) IsZero() bool { return !c.set }

// String returns the cursor's text, "" for the zero Cursor.
func (c Cursor) String() string {
	b, _ := c.MarshalText()
	return string(b)
}

// MarshalText encodes the cursor as unpadded base64url of a small BSON
// document; it never fails.
func (c Cursor) MarshalText() ([]byte, error) {
	if c.IsZero() {
		return []byte{}, nil
	}
	b, err := pagetoken.Encode(bson.D{{Key: "s", Value: c.seq}, {Key: "p", Value: c.index}, {Key: "i", Value: c.id}, {Key: "b", Value: c.scope}})
	if err != nil { // the values came from a stored document
		return nil, pkg.Wrap("MarshalText", err)
	}
	return b, nil
}

// UnmarshalText reads a cursor written by MarshalText; see [ParseCursor].
func (c *Cursor) UnmarshalText(text []byte) error {
	p, err := ParseCursor(string(text))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// ParseCursor reads the text of [Cursor.String]; "" is the zero Cursor.
// Text that is not such a cursor (a seq below -1, a negative index, an
// invalid id, no scope of its parent) gives [patterns.ErrInvalid]. The id
// is only compared with the items read, never sent to the server; the
// scope is checked by Page against the parent and repository it is
// given.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := func(err error) (Cursor, error) {
		return Cursor{}, pkg.Wrap("ParseCursor", fmt.Errorf("cursor %q: %w", s, err))
	}
	vals, err := pagetoken.Decode(s, "s", "p", "i", "b")
	if err != nil {
		return bad(err)
	}
	seq, ok := vals[0].Int64OK()
	index, ok2 := vals[1].Int32OK()
	subtype, scope, ok3 := vals[3].BinaryOK()
	if !ok || !ok2 || !ok3 || seq < -1 || index < 0 || subtype != bson.TypeBinaryGeneric || len(scope) != pagetoken.ScopeSize {
		return bad(errs.Invalid("not a cursor"))
	}
	if err := validRawID(vals[2]); err != nil {
		return bad(err)
	}
	return Cursor{seq: seq, index: index, id: vals[2], scope: scope, set: true}, nil
}
