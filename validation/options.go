package validation

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Option configures [For]: an encoder setting the collection's documents
// are written with, a constraint on a field ([Field]), or the shape of
// the result ([OnlyConstrained]).
type Option func(*config)

type config struct {
	enc             encoding
	fields          []fieldConstraints
	stamped         []stamp
	onlyConstrained bool
	hook            patterns.Hook
}

// stamp is a field a writer sets itself: see [Stamped].
type stamp struct {
	name  string
	types []string
}

type fieldConstraints struct {
	path string
	cs   []Constraint
}

// IntMinSize mirrors bson.Encoder.IntMinSize: int64 and unsigned values
// that fit are stored as int32, so their bsonType is ["int", "long"].
func IntMinSize() Option { return func(c *config) { c.enc.intMinSize = true } }

// NilSliceAsEmpty mirrors bson.Encoder.NilSliceAsEmpty: a nil slice is
// stored as an empty array, never null.
func NilSliceAsEmpty() Option { return func(c *config) { c.enc.nilSliceAsEmpty = true } }

// NilMapAsEmpty mirrors bson.Encoder.NilMapAsEmpty: a nil map is stored as
// an empty document, never null.
func NilMapAsEmpty() Option { return func(c *config) { c.enc.nilMapAsEmpty = true } }

// NilByteSliceAsEmpty mirrors bson.Encoder.NilByteSliceAsEmpty: a nil
// []byte is stored as empty binary data, never null.
func NilByteSliceAsEmpty() Option { return func(c *config) { c.enc.nilBytesAsEmpty = true } }

// OmitZeroStruct mirrors bson.Encoder.OmitZeroStruct: omitempty leaves out
// a struct whose fields are all empty, so such a field is not required.
func OmitZeroStruct() Option { return func(c *config) { c.enc.omitZeroStruct = true } }

// OmitEmpty mirrors bson.Encoder.OmitEmpty: every field is treated as
// tagged omitempty.
func OmitEmpty() Option { return func(c *config) { c.enc.omitEmpty = true } }

// OnlyConstrained lists in properties only the fields that carry a
// constraint (and the objects that hold them), as a hand-written
// validator that checks a few fields does; required still lists every
// field the encoder always writes. Without it every field's type is
// checked, which is what a validator generated from a type is for.
func OnlyConstrained() Option { return func(c *config) { c.onlyConstrained = true } }

// Hook, when set, observes every operation of the validator (see
// [patterns.Hook]): [Apply] and [Check] with it, which report their
// start, commands, retries and end; nil reports nothing and costs
// nothing. The validators [Validator.Only] derives keep it. It changes
// nothing in the schema; [Validator.Validate] and the other methods send
// nothing and report nothing.
func Hook(h patterns.Hook) Option { return func(c *config) { c.hook = h } }

// Stamped declares a top-level field that the writer sets itself on
// every write, whatever T holds there, as a value of one of bsonTypes
// (versioning.Repo stamps its version as an int32, "int", and its
// revision as an ObjectID, "objectId"): where T declares the field, its
// schema is bsonTypes instead of T's, and it is not required (documents
// written before the writer stamped it may lack it). Where T does not
// but has a typed inline map, the field is declared so, beside the map's
// values (additionalProperties); otherwise nothing changes. [For] fails with [patterns.ErrInvalid] for an
// unknown bsonType, a name given twice, or constraints on the field.
func Stamped(name string, bsonTypes ...string) Option {
	return func(c *config) { c.stamped = append(c.stamped, stamp{name, bsonTypes}) }
}

// Field gives the constraints of the field at path, a BSON path of T
// ("email", "address.city"); [Items] constrains the elements of an
// array. Each path may be given once. [For] fails with
// [patterns.ErrInvalid] for a path T does not have and for a constraint
// that does not fit the field's type.
func Field(path string, cs ...Constraint) Option {
	return func(c *config) { c.fields = append(c.fields, fieldConstraints{path, cs}) }
}

// Constraint is a $jsonSchema keyword that a Go type cannot say.
type Constraint struct {
	keyword string
	set     func(n *node) error
}

// Pattern requires a string to match the regular expression re (the
// pattern keyword), sent as it is. The server matches with PCRE;
// [Validator.Validate] with Go's regexp, on re rewritten where the two
// read shared syntax differently, so that both give one verdict: a final
// $ also matches before a final newline, as in PCRE (write \z to refuse
// "ada@example.com\n"); \s and \S count the vertical tab as space, and
// \v is PCRE's vertical whitespace. A string that is not UTF-8 matches
// no pattern (PCRE, in UTF mode, refuses it). A $ with more of the pattern after
// it, a multi-line ^ with nothing after it that consumes a character
// ((?m)^$: PCRE's ^ does not match after a newline that ends the string,
// Go's does), and what Go's regexp cannot compile (lookaround,
// backreferences, \Z, possessive quantifiers), are refused with
// [patterns.ErrInvalid].
func Pattern(re string) Constraint {
	return Constraint{"pattern", func(n *node) error {
		if !n.has("string") {
			return errs.Invalid("pattern on a field of bsonType %v", n.types)
		}
		r, err := compilePattern(re)
		if err != nil {
			return err
		}
		n.pattern, n.re = re, r
		return nil
	}}
}

// Enum requires the value to equal one of values (the enum keyword),
// which must be of the field's type: strings for a string field, numbers
// for a number field. A number is written as [Minimum] writes its bound
// and compared by value, as the server compares it; the field's bsonType
// stays beside the enum, so an int32 field takes only int32 values. A
// field the driver may write as null (a pointer without omitempty) also
// takes null.
func Enum(values ...any) Constraint {
	return Constraint{"enum", func(n *node) error {
		if len(values) == 0 {
			return errs.Invalid("an empty enum admits nothing")
		}
		out := make([]any, 0, len(values)+1)
		for _, v := range values {
			conv, err := n.scalar(v)
			if err != nil {
				return err
			}
			out = append(out, conv)
		}
		if n.has("null") {
			out = append(out, nil)
		}
		n.enum = out
		return nil
	}}
}

// Number is the type of a bound given to [Minimum] and [Maximum].
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Minimum requires a number to be at least x (the minimum keyword). An
// integral x is written as an int32 when it fits, else an int64 (an
// integer exactly, never through float64); any other as a double, as the
// shell writes them. The comparison is exact, as the server's (an int64
// beyond 2^53, a Decimal128 beyond float64's range or precision).
func Minimum[N Number](x N) Constraint {
	return bound("minimum", x, func(n *node, v any) { n.min = v })
}

// Maximum requires a number to be at most x (the maximum keyword),
// written as [Minimum] writes its bound.
func Maximum[N Number](x N) Constraint {
	return bound("maximum", x, func(n *node, v any) { n.max = v })
}

func bound[N Number](keyword string, x N, set func(*node, any)) Constraint {
	return Constraint{keyword, func(n *node) error {
		if !n.numeric() {
			return errs.Invalid("%s on a field of bsonType %v", keyword, n.types)
		}
		v, err := number(x)
		if err != nil {
			return errs.Invalid("%s %v", keyword, x)
		}
		set(n, v)
		return nil
	}}
}

// number returns the Go number x as the shell writes it: an int32 when it
// is integral and fits, else an int64 when integral and within int64,
// else a double. Integers never go through float64, which would round
// those beyond 2^53.
func number(x any) (any, error) {
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return integer(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u := v.Uint(); u <= math.MaxInt64 {
			return integer(int64(u)), nil
		}
		return nil, fmt.Errorf("%v is beyond int64", x)
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return nil, fmt.Errorf("%v is not a number", f)
		case f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64:
			return integer(int64(f)), nil
		}
		return f, nil
	}
	return nil, fmt.Errorf("%T is not a number", x)
}

// integer returns i as an int32 when it fits, else as an int64.
func integer(i int64) any {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return int32(i)
	}
	return i
}

// MinLength requires a string of at least k characters (code points),
// counted as the server counts them: each byte but the UTF-8
// continuation bytes 0x80-0xBF, which in a string that is not UTF-8
// count 0 too.
func MinLength(k int) Constraint {
	return count("minLength", k, "string", func(n *node) { n.minLength = k })
}

// MaxLength requires a string of at most k characters (code points),
// counted as for [MinLength].
func MaxLength(k int) Constraint {
	return count("maxLength", k, "string", func(n *node) { n.maxLen = k })
}

// MinItems requires an array of at least k elements.
func MinItems(k int) Constraint {
	return count("minItems", k, "array", func(n *node) { n.minItems = k })
}

// MaxItems requires an array of at most k elements.
func MaxItems(k int) Constraint {
	return count("maxItems", k, "array", func(n *node) { n.maxItems = k })
}

func count(keyword string, k int, on string, set func(*node)) Constraint {
	return Constraint{keyword, func(n *node) error {
		if !n.has(on) {
			return errs.Invalid("%s on a field of bsonType %v", keyword, n.types)
		}
		if k < 0 || k > math.MaxInt32 {
			return errs.Invalid("%s %d", keyword, k)
		}
		set(n)
		return nil
	}}
}

// Items applies cs to each element of an array.
func Items(cs ...Constraint) Constraint {
	return Constraint{"items", func(n *node) error {
		if !n.has("array") || n.items == nil {
			return errs.Invalid("items on a field of bsonType %v", n.types)
		}
		return constrainAll(n.items, cs)
	}}
}

func constrainAll(n *node, cs []Constraint) error {
	seen := map[string]bool{}
	for _, c := range cs {
		if c.set == nil {
			return errs.Invalid("a zero Constraint")
		}
		if seen[c.keyword] {
			return errs.Invalid("%s given twice", c.keyword)
		}
		seen[c.keyword] = true
		if err := c.set(n); err != nil {
			return err
		}
	}
	return nil
}

// numeric reports whether n holds only numbers (and maybe null).
func (n *node) numeric() bool {
	if len(n.types) == 0 {
		return false
	}
	for _, t := range n.types {
		switch t {
		case "int", "long", "double", "decimal", "null":
		default:
			return false
		}
	}
	return true
}

// scalar converts an enum value to the type n stores.
func (n *node) scalar(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if n.has("string") {
			return x, nil
		}
	case bool:
		if n.has("bool") {
			return x, nil
		}
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		if n.numeric() {
			if conv, err := number(x); err == nil {
				return conv, nil
			}
		}
	}
	return nil, errs.Invalid("enum value %v (%T) on a field of bsonType %v", v, v, n.types)
}

// find returns the node at path below n: the declared fields of objects,
// through pointers.
func (n *node) find(path string) (*node, error) {
	cur := n
	for _, seg := range strings.Split(path, ".") {
		next := cur.prop(seg)
		if next == nil {
			return nil, errs.Invalid("field %q: no such field in the type", path)
		}
		cur = next
	}
	return cur, nil
}

// constrain applies the Stamped and Field options to root.
func (c *config) constrain(root *node) error {
	seen := map[string]bool{}
	for _, s := range c.stamped {
		if seen[s.name] {
			return errs.Invalid("field %q given twice", s.name)
		}
		seen[s.name] = true
		if len(s.types) == 0 {
			return errs.Invalid("field %q stamped with no bsonType", s.name)
		}
		for _, t := range s.types {
			if !slices.Contains(slices.Collect(maps.Values(typeNames)), t) {
				return errs.Invalid("field %q stamped with bsonType %q: no such type", s.name, t)
			}
		}
		if n := root.prop(s.name); n != nil {
			*n = *newNode(s.types...)
			root.required = slices.DeleteFunc(root.required, func(r string) bool { return r == s.name })
		} else if root.extra != nil {
			// T's typed inline map would take the field as one of
			// its values: declare it as the writer writes it.
			root.props = append(root.props, prop{s.name, newNode(s.types...)})
		}
	}
	for _, f := range c.fields {
		if seen[f.path] {
			return errs.Invalid("field %q given twice", f.path)
		}
		seen[f.path] = true
		n, err := root.find(f.path)
		if err != nil {
			return err
		}
		if err := constrainAll(n, f.cs); err != nil {
			return fmt.Errorf("field %q: %w", f.path, err)
		}
	}
	return nil
}
