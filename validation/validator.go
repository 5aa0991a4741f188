package validation

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Validator is a collection validator: the schema of the documents of a
// Go type, with the constraints given to [For], optionally checked only
// on the documents that [Validator.Only] selects. It is immutable and
// safe for concurrent use; it sends nothing.
type Validator struct {
	root *node
	only *guard
	hook patterns.Hook // the Hook option
}

// guard selects the documents a validator checks: those whose field
// equals one of values (nil: the field is missing or null).
type guard struct {
	field  string
	values []any
}

// For returns the validator of the documents the driver encodes from a
// T, a struct type (or a pointer to one), with the constraints and
// encoder settings of opts. It fails with [patterns.ErrInvalid] for a
// type the driver cannot encode, a recursive type, a path T lacks, a
// constraint that does not fit its field, or a pattern Go cannot
// compile. It sends nothing.
func For[T any](opts ...Option) (*Validator, error) {
	v, err := forType(reflect.TypeFor[T](), opts)
	if err != nil {
		return nil, pkg.Wrap("For", err)
	}
	return v, nil
}

// forType is For of the type t.
func forType(t reflect.Type, opts []Option) (*Validator, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, errs.Invalid("%s is not a struct: a document is", t)
	}
	b := builder{enc: c.enc, busy: map[reflect.Type]bool{}}
	root := newNode("object")
	if err := b.fields(root, t, false, true); err != nil {
		return nil, err
	}
	if err := c.constrain(root); err != nil {
		return nil, err
	}
	generatedID(root)
	if c.onlyConstrained {
		keepConstrained(root)
	}
	return &Validator{root: root, hook: c.hook}, nil
}

// generatedID admits at the root the _id the driver gives a document
// that has none: InsertOne adds an ObjectID (mongo.go ensureID, v2.10.0).
// Where T's _id may be left out (omitempty on an empty value, a nil
// inlined struct pointer), it may be an ObjectID too; where T has no _id
// but a typed inline map, whose values are additionalProperties, _id is
// declared an ObjectID so that the map's type does not refuse it. With
// no inline map any other field is admitted already.
func generatedID(root *node) {
	id := root.prop("_id")
	switch {
	case id == nil && root.extra != nil:
		root.props = append([]prop{{"_id", newNode("objectId")}}, root.props...)
	case id != nil && len(id.types) > 0 && !id.has("objectId") && !slices.Contains(root.required, "_id"):
		id.types = append(id.types, "objectId")
	}
}

// keepConstrained drops from n's properties the fields without a
// constraint at or below them.
func keepConstrained(n *node) {
	kept := n.props[:0]
	for _, p := range n.props {
		if p.n.constrained() {
			keepConstrained(p.n)
			kept = append(kept, p)
		}
	}
	n.props = kept
	if n.items != nil && !n.items.constrained() {
		n.items = nil
	}
	if n.extra != nil && !n.extra.constrained() {
		n.extra = nil
	}
}

// Only returns a validator that checks v only on the documents whose
// field (a dotted path reaches into documents, and into the documents of
// arrays) equals one of values (a nil or bson.Null{} value: field missing
// or null); any other document passes as it is. Values compare as the
// server compares them ($in): 3, int64(3) and 3.0 are one value, a string
// and a symbol of one text too, and an array field matches when one of
// its elements does. It is how a collection in the middle of a
// migration keeps its older shapes: versioning.Repo.Validator checks the
// current shape at the current version only. v is unchanged; Only sends
// nothing. It fails with [patterns.ErrInvalid] for a zero or nil v, a
// field that is not a BSON path ("$where", "a..b"), no values (a guard
// that breaks every write: {$nin: null} is refused by the server), and a
// value that $in does not compare by equality (a document, an array, a
// regular expression) or that the driver cannot encode.
func (v *Validator) Only(field string, values ...any) (*Validator, error) {
	if err := v.usable(); err != nil {
		return nil, pkg.Wrap("Only", err)
	}
	if err := check.Path(field); err != nil {
		return nil, pkg.Wrap("Only", err)
	}
	if len(values) == 0 {
		return nil, pkg.Wrap("Only", errs.Invalid("field %q: no values: the guard would select nothing and break every write", field))
	}
	for _, x := range values {
		if x == nil {
			continue
		}
		switch r := raw(x); r.Type {
		case 0:
			return nil, pkg.Wrap("Only", errs.Invalid("field %q: value %v (%T): the driver cannot encode it", field, x, x))
		case bson.TypeEmbeddedDocument, bson.TypeArray, bson.TypeRegex:
			return nil, pkg.Wrap("Only", errs.Invalid("field %q: value %v: a %s, which $in does not compare by equality", field, r, typeNames[r.Type]))
		}
	}
	return &Validator{root: v.root, only: &guard{field: field, values: values}, hook: v.hook}, nil
}

// usable refuses a nil Validator and a zero one (not made by [For]).
func (v *Validator) usable() error {
	if v == nil || v.root == nil {
		return errs.Invalid("a nil or zero Validator: make one with For")
	}
	return nil
}

// Schema returns the $jsonSchema document of v, with every keyword
// (MongoDB's form). A new document at each call; {} for a zero
// Validator, which [Check], [Apply] and the other methods refuse.
func (v *Validator) Schema() bson.D {
	if v.usable() != nil {
		return bson.D{}
	}
	return v.root.schema(true)
}

// Document returns the validator as MongoDB takes it: {$jsonSchema:
// [Validator.Schema]}, within {$or: [{field: {$nin: values}},
// {$jsonSchema: ...}]} under [Validator.Only]. A new document at each
// call.
func (v *Validator) Document() bson.D {
	if v.usable() != nil {
		return bson.D{{Key: "$jsonSchema", Value: bson.D{}}}
	}
	return v.guarded(bson.D{{Key: "$jsonSchema", Value: v.Schema()}})
}

// String returns [Validator.Document] as MongoDB's relaxed Extended JSON,
// for logs and error messages (%v of a *Validator). A nil or zero
// Validator, which every other method refuses, reads "<invalid validator>".
func (v *Validator) String() string {
	if v.usable() != nil {
		return "<invalid validator>"
	}
	b, err := bson.MarshalExtJSON(v.Document(), false, false)
	if err != nil {
		return fmt.Sprintf("<validator: %v>", err)
	}
	return string(b)
}

// Portable returns the validator in a form that needs only
// [patterns.FeatureValidators]: the $jsonSchema without required, enum
// and additionalProperties, and query operators for them, {$and:
// [{$jsonSchema: core}, {$nor: [filters]}]}, where each filter matches
// the documents that break one of them. It means what
// [Validator.Document] means, and MongoDB accepts it too. A map whose
// values have a type (additionalProperties with a schema), an array of
// arrays with a constraint, a field whose name holds a dot or starts
// with $ (which a query reads as a path or an operator), or a field of
// bsonType minKey or maxKey (which FerretDB 2's $jsonSchema never
// matches) has no such form: Portable returns an error
// wrapping [patterns.ErrUnsupported] naming [patterns.FeatureJSONSchema].
func (v *Validator) Portable() (bson.D, error) {
	if err := v.usable(); err != nil {
		return nil, pkg.Wrap("Portable", err)
	}
	d, err := v.portable()
	if err != nil {
		return nil, pkg.Wrap("Portable", noPortable(err, "a server without "+string(patterns.FeatureJSONSchema)))
	}
	return d, nil
}

// portable is Portable's form, or an [errNoPortable].
func (v *Validator) portable() (bson.D, error) {
	core := bson.D{{Key: "$jsonSchema", Value: v.root.schema(false)}}
	breaks, err := v.root.violations("", nil)
	if err != nil {
		return nil, err
	}
	if len(breaks) == 0 {
		return v.guarded(core), nil
	}
	nor := make(bson.A, len(breaks))
	for i, b := range breaks {
		nor[i] = b
	}
	return v.guarded(bson.D{{Key: "$and", Value: bson.A{core, bson.D{{Key: "$nor", Value: nor}}}}}), nil
}

func (v *Validator) guarded(d bson.D) bson.D {
	if v.only == nil {
		return d
	}
	return bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: v.only.field, Value: bson.D{{Key: "$nin", Value: bson.A(v.only.values)}}}},
		d,
	}}}
}

// schema renders n as $jsonSchema; full adds the keywords only MongoDB
// has (required, enum, additionalProperties). The bsonType stays beside
// an enum in both forms: the enum compares numbers by value (1, 1.0 and
// NumberLong(1) are one value), the type keeps the field's.
func (n *node) schema(full bool) bson.D {
	d := bson.D{} // an empty schema is {}, not null
	add := func(k string, v any) { d = append(d, bson.E{Key: k, Value: v}) }
	if len(n.types) > 0 {
		if len(n.types) == 1 {
			add("bsonType", n.types[0])
		} else {
			add("bsonType", strSlice(n.types))
		}
	}
	if full && len(n.required) > 0 {
		add("required", strSlice(n.required))
	}
	if len(n.props) > 0 {
		props := make(bson.D, len(n.props))
		for i, p := range n.props {
			props[i] = bson.E{Key: p.name, Value: p.n.schema(full)}
		}
		add("properties", props)
	}
	if full && n.extra != nil {
		add("additionalProperties", n.extra.schema(full))
	}
	if n.items != nil {
		add("items", n.items.schema(full))
	}
	if full && n.enum != nil {
		add("enum", bson.A(n.enum))
	}
	if n.pattern != "" {
		add("pattern", n.pattern)
	}
	if n.min != nil {
		add("minimum", n.min)
	}
	if n.max != nil {
		add("maximum", n.max)
	}
	for _, c := range []struct {
		k string
		v int
	}{{"minLength", n.minLength}, {"maxLength", n.maxLen}, {"minItems", n.minItems}, {"maxItems", n.maxItems}} {
		if c.v >= 0 {
			add(c.k, int32(c.v))
		}
	}
	return d
}

func strSlice(s []string) bson.A {
	a := make(bson.A, len(s))
	for i, x := range s {
		a[i] = x
	}
	return a
}

// violations appends to out one filter per way a value at path p (""
// for the document, or for an element inside $elemMatch) breaks what the
// core $jsonSchema cannot say: a missing required field, a value outside
// an enum. The core schema holds the types, so a path below p crosses
// only objects.
func (n *node) violations(p string, out []bson.D) ([]bson.D, error) {
	if n.extra != nil {
		return nil, unsupported("additionalProperties with a schema (a map's value type)")
	}
	if n.has("minKey") || n.has("maxKey") {
		// FerretDB 2's $jsonSchema never matches these bsonTypes: the
		// validator would refuse every value the driver writes.
		return nil, unsupported(fmt.Sprintf("the bsonType minKey or maxKey (of %q)", p))
	}
	if n.enum != nil && p != "" {
		out = append(out, bson.D{{Key: p, Value: bson.D{{Key: "$exists", Value: true}, {Key: "$nin", Value: bson.A(n.enum)}}}})
	}
	for _, r := range n.required {
		f := bson.D{{Key: join(p, r), Value: bson.D{{Key: "$exists", Value: false}}}}
		if p != "" { // only where the object is there
			f = append(bson.D{{Key: p, Value: bson.D{{Key: "$type", Value: "object"}}}}, f...)
		}
		out = append(out, f)
	}
	var err error
	for _, pr := range n.props {
		if strings.Contains(pr.name, ".") || strings.HasPrefix(pr.name, "$") {
			return nil, unsupported(fmt.Sprintf("the field name %q (a query reads it as a path or an operator)", pr.name))
		}
		if out, err = pr.n.violations(join(p, pr.name), out); err != nil {
			return nil, err
		}
	}
	if n.items == nil {
		return out, nil
	}
	if n.items.enum != nil { // an element outside the enum
		out = append(out, bson.D{{Key: p, Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$nin", Value: bson.A(n.items.enum)}}}}}})
	}
	inner, err := n.items.violations("", nil)
	if err != nil {
		return nil, err
	}
	if len(inner) == 0 {
		return out, nil
	}
	if n.items.items != nil || !n.items.has("object") {
		return nil, unsupported("a constraint on the elements of an array of arrays")
	}
	// $elemMatch skips the elements that are not documents; the core
	// schema has given each its type.
	match := inner[0]
	if len(inner) > 1 {
		or := make(bson.A, len(inner))
		for i, f := range inner {
			or[i] = f
		}
		match = bson.D{{Key: "$or", Value: or}}
	}
	return append(out, bson.D{{Key: p, Value: bson.D{{Key: "$elemMatch", Value: match}}}}), nil
}

func join(p, name string) string {
	if p == "" {
		return name
	}
	return p + "." + name
}

// errNoPortable names what the portable form cannot say.
type errNoPortable string

func (e errNoPortable) Error() string { return string(e) + " has no portable form" }

func unsupported(what string) error { return errNoPortable(what) }

// noPortable turns an errNoPortable into an error wrapping
// [patterns.ErrUnsupported] that names [patterns.FeatureJSONSchema] and
// server.
func noPortable(err error, server string) error {
	return fmt.Errorf("%w: %w", err, &patterns.UnsupportedError{Feature: patterns.FeatureJSONSchema, Server: server})
}
