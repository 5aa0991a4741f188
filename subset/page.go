package subset

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/internal/pagetoken"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// All returns every item of the parent from the items collection, in the
// configured order (the subset's order, so its first Cap items are the
// subset when no write is in flight), each item once while others write.
// It reads them a page per find, as [Repo.Page] does: the items after the
// last one read in the configured order, served by the index of
// [Repo.Indexes], with the page's size as limit, so that the server
// answers each in one reply (more only past 16 MiB). One long cursor
// would not do: a cursor may return an item that others rewrite again
// (FerretDB 2.x's cursors do; MongoDB's can when a write moves an item's
// index entry ahead of the cursor). Building the iterator sends nothing;
// iterating sends a find per page of the options' BatchSize items
// ([DefaultAllPageSize] without one; a page shorter than that is the
// last), and holds one page in memory. It takes the same path on every
// server.
//
// While it runs, an item added or removed may or may not appear; every
// other item appears once, as stored when its page was read, in the
// place its sort value gives it. An item whose sort value an Update
// changes while All runs is read where it is when its page is read: it
// appears once if it stays on the same side of the place All has
// reached, and is missed or yielded twice (the old version and the new)
// if it moves across it, backwards or forwards. That is the one thing a
// scan in the configured order cannot rule out short of remembering
// every id it yielded; a scan in _id order would, but not in the
// subset's order.
//
// Options pass through to the driver (a comment, a projection that keeps
// SortField and IDField, which the next page starts after), except the
// filter, the sort and the batch size, which are the repository's, and
// Skip, refused with [patterns.ErrInvalid] (it would skip in every
// page). Limit bounds the items yielded. An invalid parent id is yielded
// as an error wrapping [patterns.ErrInvalid]; a missing parent yields
// nothing; an error from the server or from decoding is yielded once
// (before the items of its page) and ends the iteration, as does the
// error wrapping [patterns.ErrInvalid] of a page that meets an item
// stored without the repository that [Repo.Page] cannot page past: such
// an item is yielded in its place or ends the iteration with that error
// naming it, never skipped in silence.
func (r *Repo[P, I]) All(ctx context.Context, parentID any, opts ...options.Lister[options.FindOptions]) iter.Seq2[I, error] {
	opts = slices.Clip(opts)
	return func(yield func(I, error) bool) {
		ctx, op := r.start(ctx, "All")
		var err error
		defer op.Finish(&err)
		if err = r.all(ctx, parentID, opts, yield); err != nil {
			var zero I
			yield(zero, err)
		}
	}
}

// all yields the items of an iteration of All, and returns the error
// that ends it, for All to yield; nil when the items ran out or yield
// asked to stop.
func (r *Repo[P, I]) all(ctx context.Context, parentID any, opts []options.Lister[options.FindOptions], yield func(I, error) bool) error {
	if err := txn.Refuse(ctx); err != nil {
		return fail("All", err)
	}
	if err := patterns.ValidateID(parentID); err != nil {
		return fail("All", fmt.Errorf("parent id: %w", err))
	}
	size, limit, err := allPages(opts)
	if err != nil {
		return fail("All", fmt.Errorf("parent %s: %w", idOf(parentID), err))
	}
	var after Cursor
	for {
		n := size
		if limit > 0 {
			n = int(min(int64(n), limit))
		}
		page, next, err := r.page(ctx, parentID, after, n, opts...)
		if err != nil {
			return fail("All", fmt.Errorf("parent %s: %w", idOf(parentID), err))
		}
		for _, it := range page {
			if !yield(it, nil) {
				return nil
			}
		}
		if limit > 0 {
			if limit -= int64(len(page)); limit == 0 {
				return nil
			}
		}
		if next.IsZero() {
			return nil
		}
		after = next
	}
}

// DefaultAllPageSize is the number of items a page of [Repo.All] reads
// when its options set no BatchSize.
const DefaultAllPageSize = 1000

// allPages reads All's options: the page's size (BatchSize, or
// DefaultAllPageSize; at most 1<<20) and the limit on the items yielded
// (0: none). Skip gives patterns.ErrInvalid.
func allPages(opts []options.Lister[options.FindOptions]) (size int, limit int64, err error) {
	fo, err := listers.Merged(opts)
	if err != nil {
		return 0, 0, err
	}
	if fo.Skip != nil && *fo.Skip != 0 {
		return 0, 0, errs.Invalid("Skip: All reads in pages of the configured order; use Page to start after an item")
	}
	size = DefaultAllPageSize
	if fo.BatchSize != nil && *fo.BatchSize > 0 {
		size = min(int(*fo.BatchSize), maxN)
	}
	if fo.Limit != nil {
		limit = max(*fo.Limit, -*fo.Limit) // the driver reads a negative limit as one batch of its size
	}
	return size, limit, nil
}

// Page returns up to limit items of the parent that come after the cursor
// in the configured order (from the first when after is the zero
// Cursor), and the cursor to pass for the next page, which is the zero
// Cursor when there is none. It sends one find, which reads limit+1
// items from the index of [Repo.Indexes] in one batch: keyset pagination,
// so a deep page costs what the first one costs, and a page does not skip
// or repeat items when items before it are added or removed. The pages
// hold what [Repo.All] yields, in its order, for the sort values and ids
// the repository stores (the filter reaches the types the server sorts
// after the cursor's; descending, also NaN and a missing sort value,
// which sort after every number). A limit outside 1 to 1<<20 gives
// [patterns.ErrInvalid]. Items stored without the repository are yielded
// in their place, or stop the pages with an error wrapping
// [patterns.ErrInvalid] that names the item; never skipped in silence. A
// page that ends on an item whose sort value the repository refuses
// (NaN, null, missing, an array...) gives that error, since no filter
// continues exactly after it; so does a page after the first that meets
// an item whose sort value or id is of a type the filter cannot place
// (a symbol, MinKey, undefined, a regular expression, JavaScript, a
// DBPointer, MaxKey, an array: FerretDB 1.x names none in $type, and an
// array sorts by its least element, or its greatest descending, which no
// range operator matches), wherever that item sorts: the filter matches
// such items before the cursor as well as after it. The first page
// yields them in their place.
// It takes the same path on every server.
func (r *Repo[P, I]) Page(ctx context.Context, parentID any, after Cursor, limit int) (_ []I, _ Cursor, err error) {
	ctx, op := r.start(ctx, "Page")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return nil, Cursor{}, fail("Page", err)
	}
	if err := patterns.ValidateID(parentID); err != nil {
		return nil, Cursor{}, fail("Page", fmt.Errorf("parent id: %w", err))
	}
	if limit < 1 || limit > maxN {
		return nil, Cursor{}, fail("Page", errs.Invalid("limit %d; want 1 to %d", limit, maxN))
	}
	out, next, err := r.page(ctx, parentID, after, limit)
	if err != nil {
		return nil, Cursor{}, fail("Page", fmt.Errorf("parent %s: %w", idOf(parentID), err))
	}
	return out, next, nil
}

// page reads the page of Page and of All's pages: opts, the caller's, come
// before the page's sort, limit and batch size, which win.
func (r *Repo[P, I]) page(ctx context.Context, parentID any, after Cursor, limit int, opts ...options.Lister[options.FindOptions]) ([]I, Cursor, error) {
	found, err := r.findItems(ctx, r.cmd.page(parentID, after), append(opts, r.cmd.firstN(limit+1))...)
	if err != nil {
		return nil, Cursor{}, err
	}
	if !after.IsZero() {
		// The $not clauses of the filter match the values it cannot
		// place wherever they sort: before the cursor as well as after.
		for _, d := range found {
			s, id := d.Lookup(r.sortPath...), d.Lookup(r.cfg.IDField)
			field, v := r.cfg.SortField, s
			if placed(s.Type) {
				field, v = r.cfg.IDField, id
			}
			if !placed(v.Type) {
				return nil, Cursor{}, errs.Invalid("cannot page past item %s: its %s is a BSON %s, which no page after the first can place", bsonid.Text(id), field, v.Type)
			}
		}
	}
	more := len(found) > limit
	found = found[:min(len(found), limit)]
	out := make([]I, len(found))
	for i, d := range found {
		if err := bson.Unmarshal(d, &out[i]); err != nil {
			return nil, Cursor{}, fmt.Errorf("decode item: %w", err)
		}
	}
	if !more {
		return out, Cursor{}, nil
	}
	last := found[len(found)-1]
	next := Cursor{sort: last.Lookup(r.sortPath...), id: last.Lookup(r.cfg.IDField)}
	if err := checkScalar(next.sort); err != nil || next.id.IsZero() {
		// Stored without the repository, and without a sort value or id.
		return nil, Cursor{}, errs.Invalid("cannot continue after item %s: no scalar %s and %s", bsonid.Text(next.id), r.cfg.SortField, r.cfg.IDField)
	}
	if !placed(next.id.Type) {
		// Stored without the repository: MinKey or a symbol, which no
		// filter of page places (see placed).
		return nil, Cursor{}, errs.Invalid("cannot continue after item %s: its %s is a BSON %s, which no page after the first can place", bsonid.Text(next.id), r.cfg.IDField, next.id.Type)
	}
	return out, next, nil
}

// Cursor is a position in a parent's items: the sort value and the id of
// the last item of a page, which [Repo.Page] returns. The zero Cursor is
// the start. To hand it to a client, encode it with [Cursor.String] (or
// as JSON text, through MarshalText) and read it back with [ParseCursor];
// the text is URL-safe and opaque to clients.
type Cursor struct {
	sort, id bson.RawValue
}

// IsZero reports whether c is the zero Cursor, the start.
func (c Cursor) IsZero() bool { return c.id.Type == 0 }

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
	b, err := pagetoken.Encode(bson.D{{Key: "s", Value: c.sort}, {Key: "i", Value: c.id}})
	if err != nil { // the values came from a stored document or were validated
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
// Text that is not such a cursor gives [patterns.ErrInvalid]. It checks
// that both values are scalars, so that a cursor forged by a client cannot
// carry query operators into the page's filter.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	vals, err := pagetoken.Decode(s, "s", "i")
	if err != nil {
		return Cursor{}, pkg.Wrap("ParseCursor", fmt.Errorf("cursor %q: %w", s, err))
	}
	c := Cursor{sort: vals[0], id: vals[1]}
	if err := checkScalar(c.sort); err != nil {
		return Cursor{}, pkg.Wrap("ParseCursor", fmt.Errorf("cursor %q: sort value: %w", s, err))
	}
	if err := validateRawID(c.id); err != nil {
		return Cursor{}, pkg.Wrap("ParseCursor", fmt.Errorf("cursor %q: %w", s, err))
	}
	return c, nil
}
