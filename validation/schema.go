package validation

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// node is the schema of one value: the keywords of its $jsonSchema.
type node struct {
	types    []string // bsonType; empty: any type
	props    []prop   // an object's declared fields, in the encoder's order
	required []string
	extra    *node // an object's other fields (a map's values); nil: not declared
	items    *node // an array's elements; nil: any

	enum               []any
	pattern            string
	re                 *regexp.Regexp
	min, max           any // numbers as given, nil when unset
	minLength, maxLen  int // -1 when unset
	minItems, maxItems int // -1 when unset
}

// prop is one declared field of an object.
type prop struct {
	name string
	n    *node
}

func newNode(types ...string) *node {
	return &node{types: types, minLength: -1, maxLen: -1, minItems: -1, maxItems: -1}
}

// has reports whether n's value may be of type t.
func (n *node) has(t string) bool { return slices.Contains(n.types, t) }

// nullable adds "null" to n's types, unless n takes any type.
func (n *node) nullable() *node {
	if len(n.types) > 0 && !n.has("null") {
		n.types = append(n.types, "null")
	}
	return n
}

// prop returns the declared field name of n, or nil.
func (n *node) prop(name string) *node {
	for _, p := range n.props {
		if p.name == name {
			return p.n
		}
	}
	return nil
}

// constrained reports whether a constraint was set on n or below it.
func (n *node) constrained() bool {
	if n.enum != nil || n.pattern != "" || n.min != nil || n.max != nil || n.minLength >= 0 || n.maxLen >= 0 || n.minItems >= 0 || n.maxItems >= 0 {
		return true
	}
	for _, p := range n.props {
		if p.n.constrained() {
			return true
		}
	}
	return n.items != nil && n.items.constrained() || n.extra != nil && n.extra.constrained()
}

// encoding is what the encoder's settings change in the stored shape.
type encoding struct {
	intMinSize, nilSliceAsEmpty, nilMapAsEmpty, nilBytesAsEmpty, omitZeroStruct, omitEmpty bool
}

var (
	tTime           = reflect.TypeFor[time.Time]()
	tDateTime       = reflect.TypeFor[bson.DateTime]()
	tObjectID       = reflect.TypeFor[bson.ObjectID]()
	tDecimal        = reflect.TypeFor[bson.Decimal128]()
	tBinary         = reflect.TypeFor[bson.Binary]()
	tD              = reflect.TypeFor[bson.D]()
	tE              = reflect.TypeFor[bson.E]()
	tByte           = reflect.TypeFor[byte]()
	tBytes          = reflect.TypeFor[[]byte]()
	tRaw            = reflect.TypeFor[bson.Raw]()
	tRawValue       = reflect.TypeFor[bson.RawValue]()
	tTimestamp      = reflect.TypeFor[bson.Timestamp]()
	tRegex          = reflect.TypeFor[bson.Regex]()
	tJavaScript     = reflect.TypeFor[bson.JavaScript]()
	tSymbol         = reflect.TypeFor[bson.Symbol]()
	tMinKey         = reflect.TypeFor[bson.MinKey]()
	tMaxKey         = reflect.TypeFor[bson.MaxKey]()
	tNull           = reflect.TypeFor[bson.Null]()
	tUndefined      = reflect.TypeFor[bson.Undefined]()
	tValueMarshaler = reflect.TypeFor[bson.ValueMarshaler]()
	tMarshaler      = reflect.TypeFor[bson.Marshaler]()
	tZeroer         = reflect.TypeFor[bson.Zeroer]()
)

// builder walks a Go type into its schema, as the encoder would write it.
type builder struct {
	enc  encoding
	busy map[reflect.Type]bool // structs being walked: a recursive type
}

// value returns the schema of a value of type t; minSize is the field's
// minsize tag.
func (b *builder) value(t reflect.Type, minSize bool) (*node, error) {
	switch t {
	case tTime, tDateTime:
		return newNode("date"), nil
	case tObjectID:
		return newNode("objectId"), nil
	case tDecimal:
		return newNode("decimal"), nil
	case tBinary:
		return newNode("binData"), nil
	case tRaw:
		return newNode("object"), nil
	case tRawValue:
		return newNode(), nil
	case tTimestamp:
		return newNode("timestamp"), nil
	case tRegex:
		return newNode("regex"), nil
	case tJavaScript:
		return newNode("javascript"), nil
	case tSymbol:
		return newNode("symbol"), nil
	case tMinKey:
		return newNode("minKey"), nil
	case tMaxKey:
		return newNode("maxKey"), nil
	case tNull:
		return newNode("null"), nil
	case tUndefined:
		return newNode("undefined"), nil
	}
	if t.Implements(tValueMarshaler) || t.Implements(tMarshaler) ||
		reflect.PointerTo(t).Implements(tValueMarshaler) || reflect.PointerTo(t).Implements(tMarshaler) {
		return newNode(), nil // the type encodes itself as it likes
	}
	minSize = minSize || b.enc.intMinSize
	switch t.Kind() {
	case reflect.String:
		return newNode("string"), nil
	case reflect.Bool:
		return newNode("bool"), nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return newNode("int"), nil
	case reflect.Int:
		return newNode("int", "long"), nil
	case reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Uint:
		if minSize {
			return newNode("int", "long"), nil
		}
		return newNode("long"), nil
	case reflect.Float32, reflect.Float64:
		return newNode("double"), nil
	case reflect.Interface:
		return newNode(), nil
	case reflect.Pointer:
		n, err := b.value(t.Elem(), minSize)
		if err != nil {
			return nil, err
		}
		return n.nullable(), nil
	case reflect.Slice:
		var n *node
		var err error
		switch {
		case t == tBytes: // the []byte codec, with its own nil setting
			n = newNode("binData")
			if !b.enc.nilBytesAsEmpty {
				n.nullable()
			}
			return n, nil
		case t.Elem() == tByte: // a named []byte goes through the slice codec
			n = newNode("binData")
		case t.ConvertibleTo(tD):
			n = newNode("object")
		default:
			n, err = b.array(t)
		}
		if err == nil && !b.enc.nilSliceAsEmpty {
			n.nullable()
		}
		return n, err
	case reflect.Array:
		switch t.Elem() {
		case tByte:
			return newNode("binData"), nil
		case tE:
			return newNode("object"), nil
		}
		return b.array(t)
	case reflect.Map:
		n, err := b.mapOf(t)
		if err == nil && !b.enc.nilMapAsEmpty {
			n.nullable()
		}
		return n, err
	case reflect.Struct:
		n := newNode("object")
		return n, b.fields(n, t)
	}
	return nil, errs.Invalid("%s: the driver cannot encode a %s", t, t.Kind())
}

func (b *builder) array(t reflect.Type) (*node, error) {
	items, err := b.value(t.Elem(), false)
	if err != nil {
		return nil, err
	}
	n := newNode("array")
	if len(items.types) > 0 || items.constrained() {
		n.items = items
	}
	return n, nil
}

func (b *builder) mapOf(t reflect.Type) (*node, error) {
	vals, err := b.value(t.Elem(), false)
	if err != nil {
		return nil, err
	}
	n := newNode("object")
	if len(vals.types) > 0 {
		n.extra = vals
	}
	return n, nil
}

// field is one field of a struct as the encoder lays it out.
type field struct {
	name     string
	depth    int // 0 for the struct's own fields, more for inlined ones
	n        *node
	optional bool // the encoder may leave it out
}

// fields adds the fields of struct t to n.
func (b *builder) fields(n *node, t reflect.Type) error {
	if b.busy[t] {
		return errs.Invalid("%s: a recursive type has no finite schema", t)
	}
	b.busy[t] = true
	defer delete(b.busy, t)
	fs, extra, err := b.layout(t, 0)
	if err != nil {
		return err
	}
	// Of two fields with one name the shallower wins, as in the encoder;
	// two at the same depth are an error there.
	byName := map[string]int{}
	var kept []field
	for _, f := range fs {
		i, dup := byName[f.name]
		switch {
		case !dup:
			byName[f.name] = len(kept)
			kept = append(kept, f)
		case kept[i].depth == f.depth:
			return errs.Invalid("%s: two fields named %q", t, f.name)
		case f.depth < kept[i].depth:
			kept[i] = f
		}
	}
	for _, f := range kept {
		n.props = append(n.props, prop{f.name, f.n})
		if !f.optional {
			n.required = append(n.required, f.name)
		}
	}
	n.extra = extra
	return nil
}

// layout returns the fields of struct t in the encoder's order, with the
// schema of an inlined map's values (nil when absent or of any type).
func (b *builder) layout(t reflect.Type, depth int) ([]field, *node, error) {
	var out []field
	var extra *node
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, skip := tags(sf)
		if skip {
			continue
		}
		omitEmpty := opts["omitempty"] || b.enc.omitEmpty
		if opts["inline"] {
			ft := sf.Type
			optional := false
			if ft.Kind() == reflect.Pointer {
				ft, optional = ft.Elem(), true // a nil pointer writes none of its fields
			}
			switch ft.Kind() {
			case reflect.Struct:
				if b.busy[ft] {
					return nil, nil, errs.Invalid("%s: a recursive type has no finite schema", ft)
				}
				b.busy[ft] = true
				inner, innerExtra, err := b.layout(ft, depth+1)
				delete(b.busy, ft)
				if err != nil {
					return nil, nil, err
				}
				for _, f := range inner {
					f.optional = f.optional || optional
					out = append(out, f)
				}
				if innerExtra != nil {
					extra = innerExtra
				}
				continue
			case reflect.Map:
				if !optional && ft.Key().Kind() == reflect.String {
					vals, err := b.value(ft.Elem(), false)
					if err != nil {
						return nil, nil, err
					}
					if len(vals.types) > 0 {
						extra = vals
					}
					continue
				}
			}
			return nil, nil, errs.Invalid("%s.%s: the driver inlines only a struct, a struct pointer or a map with string keys", t, sf.Name)
		}
		n, err := b.value(sf.Type, opts["minsize"])
		if err != nil {
			return nil, nil, fmt.Errorf("%s.%s: %w", t, sf.Name, err)
		}
		out = append(out, field{name: name, depth: depth, n: n, optional: omitEmpty && b.canBeEmpty(sf.Type)})
	}
	return out, extra, nil
}

// canBeEmpty reports whether omitempty can leave a value of type t out,
// as the encoder's isEmpty decides.
func (b *builder) canBeEmpty(t reflect.Type) bool {
	if t.Implements(tZeroer) {
		return true
	}
	if t.Kind() == reflect.Struct {
		return b.enc.omitZeroStruct
	}
	return true // every other kind has an empty or zero value
}

// tags reads a field's bson tag as the driver does: the name (the Go name
// lower-cased when none), the options, and whether it is skipped ("-").
func tags(sf reflect.StructField) (name string, opts map[string]bool, skip bool) {
	tag, ok := sf.Tag.Lookup("bson")
	if !ok && !strings.Contains(string(sf.Tag), ":") && len(sf.Tag) > 0 {
		tag = string(sf.Tag)
	}
	if tag == "-" {
		return "", nil, true
	}
	name = strings.ToLower(sf.Name)
	opts = map[string]bool{}
	for i, s := range strings.Split(tag, ",") {
		if i == 0 && s != "" {
			name = s
		}
		opts[s] = true
	}
	return name, opts, false
}
