package validation

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsontag"
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
	tE              = reflect.TypeFor[bson.E]()
	tD              = reflect.TypeFor[bson.D]()
	tByte           = reflect.TypeFor[byte]()
	tBytes          = reflect.TypeFor[[]byte]()
	tString         = reflect.TypeFor[string]()
	tJSONNumber     = reflect.TypeFor[json.Number]()
	tValueMarshaler = reflect.TypeFor[bson.ValueMarshaler]()
	tMarshaler      = reflect.TypeFor[bson.Marshaler]()
	tZeroer         = reflect.TypeFor[bson.Zeroer]()
)

// registered are the types with an encoder of their own in the driver's
// default registry (bson/default_value_encoders.go and
// primitive_codecs.go, registerDefaultEncoders and
// registerPrimitiveCodecs, v2.10.0), by the BSON types it writes. The
// registry looks them up by the exact type before any interface or kind
// (Registry.LookupEncoder), so a named type of one of them goes by its
// kind instead. Empty: any type. json.Number and []byte are not here:
// what they write depends on the context (minsize, nil).
var registered = map[reflect.Type][]string{
	tTime:                                 {"date"},   // timeCodec
	tDateTime:                             {"date"},   // dateTimeEncodeValue
	reflect.TypeFor[url.URL]():            {"string"}, // urlEncodeValue: u.String()
	reflect.TypeFor[bson.ObjectID]():      {"objectId"},
	reflect.TypeFor[bson.Decimal128]():    {"decimal"},
	reflect.TypeFor[bson.Binary]():        {"binData"},
	reflect.TypeFor[bson.Vector]():        {"binData"}, // vectorEncodeValue: subtype 9
	reflect.TypeFor[bson.JavaScript]():    {"javascript"},
	reflect.TypeFor[bson.Symbol]():        {"symbol"},
	reflect.TypeFor[bson.CodeWithScope](): {"javascriptWithScope"},
	reflect.TypeFor[bson.DBPointer]():     {"dbPointer"},
	reflect.TypeFor[bson.Timestamp]():     {"timestamp"},
	reflect.TypeFor[bson.Regex]():         {"regex"},
	reflect.TypeFor[bson.MinKey]():        {"minKey"},
	reflect.TypeFor[bson.MaxKey]():        {"maxKey"},
	reflect.TypeFor[bson.Null]():          {"null"},
	reflect.TypeFor[bson.Undefined]():     {"undefined"},
	reflect.TypeFor[bson.Raw]():           {"object"}, // rawEncodeValue
	reflect.TypeFor[bsoncore.Document]():  {"object"}, // coreDocumentEncodeValue
	reflect.TypeFor[bsoncore.Array]():     {"array"},  // arrayCodec
	reflect.TypeFor[bson.RawValue]():      nil,        // rawValueEncodeValue: its own type
	reflect.TypeFor[any]():                nil,        // emptyInterfaceCodec: the dynamic value's
}

// builder walks a Go type into its schema, as the encoder would write it.
type builder struct {
	enc  encoding
	busy map[reflect.Type]bool // structs being walked: a recursive type
}

// value returns the schema of a value of type t written with minsize in
// force (the field's tag or an enclosing field's: the struct codec hands
// it down to everything below a field, EncodeContext.minSize).
func (b *builder) value(t reflect.Type, minSize bool) (*node, error) {
	return b.typed(t, minSize, false)
}

// typed is value; omitNil: a nil pointer, slice or map is left out
// (omitempty), so it is never written as null.
func (b *builder) typed(t reflect.Type, minSize, omitNil bool) (*node, error) {
	minSize = minSize || b.enc.intMinSize
	if types, ok := registered[t]; ok {
		return newNode(types...), nil
	}
	switch t {
	case tJSONNumber: // jsonNumberEncodeValue: an int64 (intEncodeValue, minsize applies), else a double
		if minSize {
			return newNode("int", "long", "double"), nil
		}
		return newNode("long", "double"), nil
	case tBytes: // byteSliceCodec, with its own nil setting
		n := newNode("binData")
		if !b.enc.nilBytesAsEmpty && !omitNil {
			n.nullable()
		}
		return n, nil
	}
	// The interface encoders, ValueMarshaler before Marshaler
	// (Registry.lookupInterfaceEncoder), then the kind.
	switch {
	case t.Implements(tValueMarshaler):
		return newNode(), nil // valueMarshalerEncodeValue: the type it returns
	case t.Implements(tMarshaler): // marshalerEncodeValue: a document, or null for a nil pointer
		n := newNode("object")
		if t.Kind() == reflect.Pointer && t.Elem().Implements(tMarshaler) && !omitNil {
			n.nullable()
		}
		return n, nil
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(tValueMarshaler):
		return newNode(), nil // condAddrEncoder: the marshaler where addressable, the kind elsewhere
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(tMarshaler):
		// condAddrEncoder: for a struct, a document either way (the
		// marshaler's, or the struct codec's), of any shape.
		if t.Kind() == reflect.Struct {
			return newNode("object"), nil
		}
		return newNode(), nil
	}
	switch t.Kind() {
	case reflect.String: // stringCodec
		return newNode("string"), nil
	case reflect.Bool:
		return newNode("bool"), nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16: // intEncodeValue, uintCodec
		return newNode("int"), nil
	case reflect.Int: // intEncodeValue: int32 when it fits
		return newNode("int", "long"), nil
	case reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Uint: // int32 only under minsize
		if minSize {
			return newNode("int", "long"), nil
		}
		return newNode("long"), nil
	case reflect.Float32, reflect.Float64:
		return newNode("double"), nil
	case reflect.Interface: // the dynamic value's encoder, or null
		return newNode(), nil
	case reflect.Pointer: // pointerCodec: null, or the value's encoding
		n, err := b.value(t.Elem(), minSize)
		if err != nil || omitNil {
			return n, err
		}
		return n.nullable(), nil
	case reflect.Slice: // sliceCodec
		var n *node
		var err error
		switch {
		case t.Elem() == tByte:
			n = newNode("binData")
		case t.ConvertibleTo(tD):
			n = newNode("object")
		default:
			n, err = b.array(t, minSize)
		}
		if err == nil && !b.enc.nilSliceAsEmpty && !omitNil {
			n.nullable()
		}
		return n, err
	case reflect.Array: // arrayEncodeValue
		switch t.Elem() {
		case tByte:
			return newNode("binData"), nil
		case tE:
			return newNode("object"), nil
		}
		return b.array(t, minSize)
	case reflect.Map: // mapCodec
		n, err := b.mapOf(t, minSize)
		if err == nil && !b.enc.nilMapAsEmpty && !omitNil {
			n.nullable()
		}
		return n, err
	case reflect.Struct: // structCodec
		n := newNode("object")
		return n, b.fields(n, t, minSize, false)
	}
	return nil, errs.Invalid("%s: the driver cannot encode a %s", t, t.Kind())
}

func (b *builder) array(t reflect.Type, minSize bool) (*node, error) {
	items, err := b.value(t.Elem(), minSize)
	if err != nil {
		return nil, err
	}
	n := newNode("array")
	if len(items.types) > 0 || items.constrained() {
		n.items = items
	}
	return n, nil
}

func (b *builder) mapOf(t reflect.Type, minSize bool) (*node, error) {
	vals, err := b.value(t.Elem(), minSize)
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
	index    []int // the path of struct field indexes from the outer struct
	n        *node
	optional bool // the encoder may leave it out
}

// fields adds the fields of struct t to n, written with minsize in force
// or not; top: t is the document itself, where the encoder's OmitEmpty
// applies (the struct codec hands it to no struct below).
func (b *builder) fields(n *node, t reflect.Type, minSize, top bool) error {
	if b.busy[t] {
		return errs.Invalid("%s: a recursive type has no finite schema", t)
	}
	b.busy[t] = true
	defer delete(b.busy, t)
	fs, err := b.layout(t, nil, minSize, top)
	if err != nil {
		return err
	}
	// Of the fields with one name the shallowest wins; two at that depth
	// are an error (structCodec.describeStructSlow, dominantField). The
	// winners keep the order of their indexes (byIndex).
	byName := map[string][]field{}
	for _, f := range fs {
		byName[f.name] = append(byName[f.name], f)
	}
	var kept []field
	for _, f := range fs {
		same := byName[f.name]
		best := slices.MinFunc(same, func(a, b field) int { return len(a.index) - len(b.index) })
		if !slices.Equal(best.index, f.index) {
			continue
		}
		if slices.ContainsFunc(same, func(o field) bool { return len(o.index) == len(f.index) && !slices.Equal(o.index, f.index) }) {
			return errs.Invalid("%s: two fields named %q at one depth (the driver refuses the type)", t, f.name)
		}
		kept = append(kept, f)
	}
	slices.SortStableFunc(kept, func(a, b field) int { return slices.Compare(a.index, b.index) })
	for _, f := range kept {
		n.props = append(n.props, prop{f.name, f.n})
		if !f.optional {
			n.required = append(n.required, f.name)
		}
	}
	// The struct's own inline map takes the other fields, written with
	// the struct's minsize (encodeMapElements gets the struct's context);
	// an inlined struct's map is ignored (describeStructSlow keeps only
	// its fields).
	extra, err := b.inlineMap(t, minSize)
	if err != nil {
		return err
	}
	n.extra = extra
	return nil
}

// inlineMap returns the schema of the values of t's inline map, nil when
// it has none or they take any type.
func (b *builder) inlineMap(t reflect.Type, minSize bool) (*node, error) {
	var extra *node
	maps := 0
	for i := range t.NumField() {
		sf := t.Field(i)
		_, opts, skip := bsontag.Parse(sf)
		if !sf.IsExported() || skip || !opts["inline"] || sf.Type.Kind() != reflect.Map {
			continue
		}
		if maps++; maps > 1 {
			return nil, errs.Invalid("%s: two inline maps (the driver refuses the type)", t)
		}
		if sf.Type.Key() != tString {
			return nil, errs.Invalid("%s.%s: an inline map needs string keys", t, sf.Name)
		}
		vals, err := b.value(sf.Type.Elem(), minSize)
		if err != nil {
			return nil, err
		}
		if len(vals.types) > 0 {
			extra = vals
		}
	}
	return extra, nil
}

// layout returns the fields of struct t in the encoder's order, the
// fields of inlined structs in place; index is the path of t's field
// indexes from the outer struct.
func (b *builder) layout(t reflect.Type, index []int, minSize, top bool) ([]field, error) {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, skip := bsontag.Parse(sf)
		if skip {
			continue
		}
		at := append(slices.Clone(index), i)
		omitEmpty := opts["omitempty"] || top && b.enc.omitEmpty
		if opts["inline"] {
			ft := sf.Type
			optional := false
			switch {
			case ft.Kind() == reflect.Map:
				continue // inlineMap's, when t is the outer struct
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				ft, optional = ft.Elem(), true // a nil pointer writes none of its fields
			case ft.Kind() != reflect.Struct:
				return nil, errs.Invalid("%s.%s: the driver inlines only a struct, a struct pointer or a map with string keys", t, sf.Name)
			}
			if b.busy[ft] {
				return nil, errs.Invalid("%s: a recursive type has no finite schema", ft)
			}
			b.busy[ft] = true
			inner, err := b.layout(ft, at, minSize, top)
			delete(b.busy, ft)
			if err != nil {
				return nil, err
			}
			for _, f := range inner {
				f.optional = f.optional || optional
				out = append(out, f)
			}
			continue
		}
		n, err := b.typed(sf.Type, minSize || opts["minsize"], omitEmpty && omitsNil(sf.Type))
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t, sf.Name, err)
		}
		out = append(out, field{name: name, index: at, n: n, optional: omitEmpty && b.canBeEmpty(sf.Type)})
	}
	return out, nil
}

// omitsNil reports whether omitempty leaves out every nil value of t, so
// that it is never written as null: a nil pointer always (isEmpty asks
// its Zeroer only when it is not nil), a nil slice or map unless t is a
// Zeroer, whose IsZero decides alone (struct_codec.go isEmpty, v2.10.0).
func omitsNil(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		return true
	case reflect.Slice, reflect.Map:
		return !t.Implements(tZeroer)
	}
	return false
}

// canBeEmpty reports whether omitempty can leave a value of type t out,
// as the encoder's isEmpty decides: a Zeroer may say so, an array only
// when of length 0, a struct only under OmitZeroStruct when each of its
// fields can be empty, any other kind at its zero value.
func (b *builder) canBeEmpty(t reflect.Type) bool {
	if t.Implements(tZeroer) {
		return true
	}
	switch t.Kind() {
	case reflect.Array:
		return t.Len() == 0
	case reflect.Struct:
		if !b.enc.omitZeroStruct {
			return false
		}
		if t == tTime {
			return true
		}
		for i := range t.NumField() {
			if sf := t.Field(i); (sf.IsExported() || sf.Anonymous) && !b.canBeEmpty(sf.Type) {
				return false
			}
		}
	}
	return true
}
