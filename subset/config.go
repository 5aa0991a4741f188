package subset

import (
	"fmt"
	"strings"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The defaults of [Config]: a field left at its zero value takes them.
const (
	// DefaultIDField identifies an item by its _id, unique across the
	// items collection.
	DefaultIDField = "_id"
	// DefaultRevisionSuffix follows Config.Field to name the revision
	// field when Config.RevisionField is empty: "reviews" gives
	// "reviewsRev".
	DefaultRevisionSuffix = "Rev"
	// DefaultPushedSuffix follows Config.Field to name the push field
	// when Config.PushedField is empty: "reviews" gives "reviewsPushed".
	DefaultPushedSuffix = "Pushed"
)

// Config says where the parents and the items live and what "most
// relevant" means. [New] validates it; the zero values noted below are
// defaults, every other field is required.
type Config struct {
	// Parents is the collection of the parent documents (products).
	Parents string
	// Field is the parent's field that holds the subset, an array of at
	// most Cap item documents (reviews). A single field name, not a path.
	Field string

	// Items is the collection that holds every item (reviews), the source
	// of truth. It must differ from Parents.
	Items string
	// ParentField is the item field that holds the parent's _id
	// (productId). An item that lacks it gets it when stored; an item that
	// has it must carry the parent's id (compared as the server compares
	// ids: the parent 7 accepts 7, int64(7) and 7.0).
	ParentField string
	// IDField is the item field that identifies an item. The zero value
	// is [DefaultIDField], "_id", unique across the items collection. Any
	// other field identifies an item within its parent: the items
	// collection then needs the unique index that [Repo.Indexes]
	// declares, and every item gets a generated ObjectID _id when it is
	// stored, in both places.
	IDField string

	// SortField is the path of the item field that orders items by
	// relevance (createdAt). Every item must have it, with a scalar value:
	// not null, a document, an array, NaN or a deprecated symbol. Items
	// may mix BSON types (the server's sort orders the types, and numbers
	// of every type compare by value), though one type (dates, or
	// numbers, or strings) is what makes the order mean something.
	SortField string
	// Descending puts the largest SortField values first (newest first);
	// the zero value puts the smallest first. Ties are broken by IDField
	// in the same direction, so the order is total and the same everywhere:
	// in the subset, in [Repo.All], in [Repo.Page] and in the index.
	Descending bool

	// Cap is N, the most items the subset holds: 1 to 1<<20. An item is
	// rejected with [patterns.ErrTooLarge] when Cap items of its size
	// would not fit in a parent that holds nothing else (its _id, the
	// subset, the revision and the push field, with BSON's overhead for
	// each element):
	// about [patterns.MaxDocumentSize]/Cap, a little less.
	Cap int

	// RevisionField is the parent's field of the revision counter that
	// every recomputation of the subset compares and increments (see the
	// package documentation). The zero value means Field followed by
	// [DefaultRevisionSuffix] ("reviewsRev"). It holds an int64 from 2^32
	// to 2^63 once stamped: a parent type that maps it maps it as an
	// int64 (an int32 field fails to decode it).
	RevisionField string

	// PushedField is the parent's field through which, on the push path
	// (see the package documentation), pushes and recomputations see each
	// other: every push of [Repo.Add] sets it to a new ObjectID, which
	// tells a recomputation that a push came after its read; a
	// recomputation that such a push made start again sets it to true,
	// which makes pushes match nothing until a compare-and-set, which
	// sets it to a new ObjectID. The zero value means Field followed by
	// [DefaultPushedSuffix] ("reviewsPushed"). Like the revision, the
	// field is the repository's: it holds an ObjectID or true, so a
	// parent type leaves it unmapped, or maps it as any (or
	// bson.RawValue); a field of either type fails to decode the other.
	PushedField string

	// CountField, when set, is the parent's field that holds the number of
	// all its items (in the items collection, not only the subset): the
	// "1,234 reviews" of a product page, read by [Repo.Count] or with the
	// parent by [Repo.Get]. Every write sets it in the same update of the
	// parent as the subset, from a count of the items read with the
	// subset's first Cap items, so it obeys the same rules: exact once the
	// writes end, and between a write's steps lagging the items collection
	// by that write alone. A count cannot be kept by increments that a
	// retry or a concurrent recomputation would apply twice, so with
	// CountField every [Repo.Add] recomputes (the portable path, on every
	// server) and every recomputation sends one count more: see the
	// package documentation. The zero value keeps no count.
	CountField string

	// Hook, when set, observes every operation of the repository (see
	// [patterns.Hook]); nil reports nothing and costs nothing.
	Hook patterns.Hook
}

// normalize fills in the defaults and validates c; every error wraps
// patterns.ErrInvalid and names the field.
func (c Config) normalize() (Config, error) {
	if c.IDField == "" {
		c.IDField = DefaultIDField
	}
	if c.RevisionField == "" && c.Field != "" {
		c.RevisionField = c.Field + DefaultRevisionSuffix
	}
	if c.PushedField == "" && c.Field != "" {
		c.PushedField = c.Field + DefaultPushedSuffix
	}
	for _, coll := range []struct{ name, value string }{{"Parents", c.Parents}, {"Items", c.Items}} {
		if err := check.Collection(coll.value); err != nil {
			return c, fmt.Errorf("config.%s: %w", coll.name, err)
		}
	}
	if c.Parents == c.Items {
		return c, fmt.Errorf("config: %w", errs.Invalid("Parents and Items are both %q; the items need their own collection", c.Items))
	}
	fields := []struct {
		name, value string
		check       func(string) error
	}{
		{"Field", c.Field, check.Field},
		{"RevisionField", c.RevisionField, check.Field},
		{"PushedField", c.PushedField, check.Field},
		{"ParentField", c.ParentField, check.Field},
		{"IDField", c.IDField, check.Field},
		{"SortField", c.SortField, check.Path},
	}
	for _, f := range fields {
		if err := f.check(f.value); err != nil {
			return c, fmt.Errorf("config.%s: %w", f.name, err)
		}
	}
	if c.Field == "_id" || c.RevisionField == "_id" || c.Field == c.RevisionField {
		return c, fmt.Errorf("config: %w", errs.Invalid("Field %q and RevisionField %q must be two fields other than _id", c.Field, c.RevisionField))
	}
	if c.PushedField == "_id" || c.PushedField == c.Field || c.PushedField == c.RevisionField {
		return c, fmt.Errorf("config: %w", errs.Invalid("PushedField %q must be a field other than _id, Field %q and RevisionField %q", c.PushedField, c.Field, c.RevisionField))
	}
	if c.CountField != "" {
		if err := check.Field(c.CountField); err != nil {
			return c, fmt.Errorf("config.CountField: %w", err)
		}
		if c.CountField == "_id" || c.CountField == c.Field || c.CountField == c.RevisionField || c.CountField == c.PushedField {
			return c, fmt.Errorf("config: %w", errs.Invalid("CountField %q must be a field other than _id, Field %q, RevisionField %q and PushedField %q", c.CountField, c.Field, c.RevisionField, c.PushedField))
		}
	}
	if c.ParentField == "_id" {
		return c, fmt.Errorf("config.ParentField: %w", errs.Invalid("an item's _id cannot hold its parent's id"))
	}
	// The three item fields play different parts; a sort path inside one
	// of the others ("productId.x") would tie them together too.
	item := []string{c.ParentField, c.IDField, c.SortField}
	for i, a := range item {
		for _, b := range item[i+1:] {
			if a == b || strings.HasPrefix(b, a+".") || strings.HasPrefix(a, b+".") {
				return c, fmt.Errorf("config: %w", errs.Invalid("ParentField %q, IDField %q and SortField %q must be distinct fields", c.ParentField, c.IDField, c.SortField))
			}
		}
	}
	if c.Cap < 1 || c.Cap > maxN {
		return c, fmt.Errorf("config.Cap: %w", errs.Invalid("%d; the subset holds from 1 to %d items", c.Cap, maxN))
	}
	return c, nil
}

// maxN is the largest Cap and page limit, 1<<20: an item document with
// an id, a sort value and a parent id takes at least 16 bytes, so no
// document could hold more.
const maxN = patterns.MaxDocumentSize / 16
