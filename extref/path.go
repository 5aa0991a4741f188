package extref

import (
	"fmt"
	"iter"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Target is one place where copies of the source live: a collection of the
// repository's database and the path of the copy in its documents.
//
// Path is either
//   - a single embedded document: "customer" (or a dotted path such as
//     "billing.customer"), one copy per document; or
//   - the copies inside the elements of an array, written with "[]" after
//     the array's path: "items[].product" (each element of items holds a
//     copy in its product field) or "authors[]" (each element of authors is
//     itself a copy). A document may hold several copies of one source.
//
// Field names follow MongoDB's rules as checked by [check.Path];
// '[' and ']' may appear only as the one "[]" marker: arrays nested in
// arrays are not supported.
type Target struct {
	Collection string
	Path       string
}

// String returns "collection.path", for errors and logs.
func (t Target) String() string { return t.Collection + "." + t.Path }

// copyPath is a parsed [Target.Path].
type copyPath struct {
	// array is the array field's path, "" for a single embedded document.
	array string
	// copy is the copy's path: in the document for a single embedded
	// document; relative to the array element otherwise ("" when the
	// element is the copy).
	copy string
}

// parsePath parses and validates a [Target.Path]. The error wraps
// [patterns.ErrInvalid] and says what is wrong.
func parsePath(p string) (copyPath, error) {
	open := strings.Index(p, "[]")
	if open < 0 {
		if strings.ContainsAny(p, "[]") {
			return copyPath{}, errs.Invalid("target path %q: '[' or ']' outside the \"[]\" array marker", p)
		}
		if err := check.Path(p); err != nil {
			return copyPath{}, fmt.Errorf("target path %q: %w", p, err)
		}
		return copyPath{copy: p}, nil
	}
	array, rest := p[:open], p[open+2:]
	if strings.ContainsAny(array, "[]") || strings.ContainsAny(rest, "[]") {
		return copyPath{}, errs.Invalid("target path %q: only one \"[]\" is allowed (arrays nested in arrays are not supported) and '[' or ']' may appear only there", p)
	}
	if array == "" {
		return copyPath{}, errs.Invalid("target path %q: no array field before \"[]\"", p)
	}
	if err := check.Path(array); err != nil {
		return copyPath{}, fmt.Errorf("target path %q: array field: %w", p, err)
	}
	if rest == "" {
		return copyPath{array: array}, nil
	}
	inner, ok := strings.CutPrefix(rest, ".")
	if !ok {
		return copyPath{}, errs.Invalid("target path %q: \"[]\" must end the path or be followed by '.'", p)
	}
	if err := check.Path(inner); err != nil {
		return copyPath{}, fmt.Errorf("target path %q: path inside the array elements: %w", p, err)
	}
	return copyPath{array: array, copy: inner}, nil
}

// String renders the path back in the syntax parsePath reads.
func (c copyPath) String() string {
	switch {
	case c.array == "":
		return c.copy
	case c.copy == "":
		return c.array + "[]"
	default:
		return c.array + "[]." + c.copy
	}
}

// inDocument is the copy's path as a query sees it from the document's
// root: "customer", "items.product", "authors".
func (c copyPath) inDocument() string { return join(c.array, c.copy) }

// join joins path segments with '.', skipping empty ones.
func join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// copies yields the copies held by doc (a target document, or its
// projection on the copy's path): the embedded document at the path, or
// the copy in each element of the array. Values of another shape (a
// scalar where a document is expected) hold no copy.
func (c copyPath) copies(doc bson.Raw) iter.Seq[bson.Raw] {
	return func(yield func(bson.Raw) bool) {
		if c.array == "" {
			if cp, ok := at(doc, c.copy); ok {
				yield(cp)
			}
			return
		}
		arr, ok := lookup(doc, c.array).ArrayOK()
		if !ok {
			return
		}
		vals, err := arr.Values()
		if err != nil {
			return
		}
		for _, v := range vals {
			if cp, ok := c.elementCopy(v); ok && !yield(cp) {
				return
			}
		}
	}
}

// elementCopy returns the copy inside one array element.
func (c copyPath) elementCopy(v bson.RawValue) (bson.Raw, bool) {
	el, ok := v.DocumentOK()
	if !ok || c.copy == "" {
		return el, ok
	}
	return at(el, c.copy)
}

// at returns the embedded document at a dotted path of doc.
func at(doc bson.Raw, path string) (bson.Raw, bool) {
	return lookup(doc, path).DocumentOK()
}

// lookup returns the value at a dotted path of doc, with Type 0 when it is
// missing.
func lookup(doc bson.Raw, path string) bson.RawValue {
	v, _ := doc.LookupErr(strings.Split(path, ".")...)
	return v
}
