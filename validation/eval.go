package validation

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FieldError is why a document fails a validator: its first failing
// field and the keyword it breaks.
type FieldError struct {
	// Field is the dotted path of the failing value ("address.city",
	// "tags.2"), empty for the document itself.
	Field string
	// Reason says what is wrong: "required field missing", "bsonType
	// string expected, got int", "does not match pattern ...".
	Reason string
}

// Error returns "field <Field>: <Reason>".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return "document: " + e.Reason
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
}

// Validate evaluates v on doc in Go, as the server evaluates
// [Validator.Document], and returns nil when doc passes, else its first
// failing field (or, for a nil or zero v, a FieldError saying so): the
// first required field missing, in the order of the type's fields, then the first declared field that breaks its schema,
// then the first other field (a map's) that breaks additionalProperties.
// Patterns are matched with Go's regexp (see [Pattern]). It sends
// nothing.
func (v *Validator) Validate(doc bson.Raw) *FieldError {
	if err := v.usable(); err != nil {
		return &FieldError{Reason: err.Error()}
	}
	if err := doc.Validate(); err != nil {
		return &FieldError{Reason: "not a BSON document: " + err.Error()}
	}
	if v.only != nil && !v.only.selects(doc) {
		return nil
	}
	return v.root.eval("", bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc})
}

// selects reports whether doc's field (a dotted path, as the server reads
// it) equals one of g's values, as $in decides: the path walks into the
// documents of an array, and a field equals a value when it, or in an
// array one of its elements, does; a string and a symbol compare by their
// text (one class in BSON comparison); a null value (nil or bson.Null{})
// selects a field that is missing or null.
func (g *guard) selects(doc bson.Raw) bool {
	for _, c := range leaves(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}, strings.Split(g.field, ".")) {
		candidates := []bson.RawValue{c}
		if c.Type == bson.TypeArray {
			elems, _ := c.Array().Values()
			candidates = append(candidates, elems...)
		}
		for _, x := range candidates {
			for _, want := range g.values {
				w := raw(want)
				switch {
				case w.Type == bson.TypeNull:
					if x.Type == 0 || x.Type == bson.TypeNull {
						return true
					}
				case x.Type != 0 && same(textual(x), textual(w)):
					return true
				}
			}
		}
	}
	return false
}

// leaves returns the values at path below val as the server's path walk
// finds them, through the documents of arrays (and an array's element by
// its index); a zero RawValue stands for a missing field.
func leaves(val bson.RawValue, path []string) []bson.RawValue {
	if len(path) == 0 {
		return []bson.RawValue{val}
	}
	switch val.Type {
	case bson.TypeEmbeddedDocument:
		next, err := val.Document().LookupErr(path[0])
		if err != nil {
			return []bson.RawValue{{}}
		}
		return leaves(next, path[1:])
	case bson.TypeArray:
		var out []bson.RawValue
		if elem, err := bson.Raw(val.Array()).LookupErr(path[0]); err == nil {
			out = append(out, leaves(elem, path[1:])...)
		}
		elems, _ := val.Array().Values()
		for _, e := range elems {
			if e.Type == bson.TypeEmbeddedDocument {
				out = append(out, leaves(e, path)...)
			}
		}
		if len(out) == 0 {
			return []bson.RawValue{{}}
		}
		return out
	}
	return []bson.RawValue{{}}
}

// textual returns a symbol as the string of its text: BSON comparison
// puts the two in one class and compares their text.
func textual(v bson.RawValue) bson.RawValue {
	if sym, ok := v.SymbolOK(); ok {
		return raw(sym)
	}
	return v
}

// typeNames are the bsonType aliases of the BSON types.
var typeNames = map[bson.Type]string{
	bson.TypeDouble: "double", bson.TypeString: "string", bson.TypeEmbeddedDocument: "object",
	bson.TypeArray: "array", bson.TypeBinary: "binData", bson.TypeUndefined: "undefined",
	bson.TypeObjectID: "objectId", bson.TypeBoolean: "bool", bson.TypeDateTime: "date",
	bson.TypeNull: "null", bson.TypeRegex: "regex", bson.TypeDBPointer: "dbPointer",
	bson.TypeJavaScript: "javascript", bson.TypeSymbol: "symbol", bson.TypeCodeWithScope: "javascriptWithScope",
	bson.TypeInt32: "int", bson.TypeTimestamp: "timestamp", bson.TypeInt64: "long",
	bson.TypeDecimal128: "decimal", bson.TypeMinKey: "minKey", bson.TypeMaxKey: "maxKey",
}

// eval checks the value val at path p against n.
func (n *node) eval(p string, val bson.RawValue) *FieldError {
	fail := func(format string, args ...any) *FieldError {
		return &FieldError{Field: p, Reason: fmt.Sprintf(format, args...)}
	}
	if len(n.types) > 0 && !n.has(typeNames[val.Type]) {
		return fail("bsonType %v expected, got %s", n.types, typeNames[val.Type])
	}
	if n.enum != nil && !inEnum(val, n.enum) {
		return fail("%s not in enum %v", val, n.enum)
	}
	switch val.Type {
	case bson.TypeEmbeddedDocument:
		return n.evalObject(p, val.Document())
	case bson.TypeArray:
		vals, _ := val.Array().Values()
		if n.minItems >= 0 && len(vals) < n.minItems {
			return fail("%d items, minItems %d", len(vals), n.minItems)
		}
		if n.maxItems >= 0 && len(vals) > n.maxItems {
			return fail("%d items, maxItems %d", len(vals), n.maxItems)
		}
		if n.items != nil {
			for i, e := range vals {
				if err := n.items.eval(join(p, strconv.Itoa(i)), e); err != nil {
					return err
				}
			}
		}
	case bson.TypeString:
		s := val.StringValue()
		k := codePoints(s)
		switch {
		// PCRE in UTF mode refuses a subject that is not UTF-8 with an
		// error, which the server takes for no match.
		case n.re != nil && (!utf8.ValidString(s) || !n.re.MatchString(s)):
			return fail("does not match pattern %s", n.pattern)
		case n.minLength >= 0 && k < n.minLength:
			return fail("%d characters, minLength %d", k, n.minLength)
		case n.maxLen >= 0 && k > n.maxLen:
			return fail("%d characters, maxLength %d", k, n.maxLen)
		}
	default:
		x, ok := numberOf(val)
		if !ok || n.min == nil && n.max == nil {
			return nil
		}
		if x.nan { // the server's comparisons with NaN are false
			return fail("NaN is not within minimum %v, maximum %v", n.min, n.max)
		}
		if lo, _ := numberOf(raw(n.min)); n.min != nil && x.cmp(lo) < 0 {
			return fail("%s below minimum %v", val, n.min)
		}
		if hi, _ := numberOf(raw(n.max)); n.max != nil && x.cmp(hi) > 0 {
			return fail("%s above maximum %v", val, n.max)
		}
	}
	return nil
}

func (n *node) evalObject(p string, doc bson.Raw) *FieldError {
	for _, r := range n.required {
		if _, err := doc.LookupErr(r); err != nil {
			return &FieldError{Field: join(p, r), Reason: "required field missing"}
		}
	}
	for _, pr := range n.props {
		if val, err := doc.LookupErr(pr.name); err == nil {
			if fe := pr.n.eval(join(p, pr.name), val); fe != nil {
				return fe
			}
		}
	}
	if n.extra == nil {
		return nil
	}
	elems, _ := doc.Elements()
	for _, e := range elems {
		if n.prop(e.Key()) == nil {
			if fe := n.extra.eval(join(p, e.Key()), e.Value()); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// raw encodes a Go value as a RawValue.
func raw(v any) bson.RawValue {
	if v == nil {
		return bson.RawValue{Type: bson.TypeNull}
	}
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		return bson.RawValue{}
	}
	return bson.Raw(b).Lookup("v")
}

// num is a BSON number's exact value: NaN, an infinity (inf -1 or +1),
// or a rational.
type num struct {
	nan bool
	inf int
	r   *big.Rat
}

// numberOf returns the exact value of an int32, int64, double or
// Decimal128 (a non-canonical one, significand above 10^34-1, is zero),
// as the server compares them (compareDecimalToDouble and
// its siblings give the mathematically exact order).
func numberOf(v bson.RawValue) (num, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return num{r: new(big.Rat).SetInt64(int64(v.Int32()))}, true
	case bson.TypeInt64:
		return num{r: new(big.Rat).SetInt64(v.Int64())}, true
	case bson.TypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return num{nan: true}, true
		case math.IsInf(f, 0):
			return num{inf: int(math.Copysign(1, f))}, true
		}
		return num{r: new(big.Rat).SetFloat64(f)}, true
	case bson.TypeDecimal128:
		d := v.Decimal128()
		switch {
		case d.IsNaN():
			return num{nan: true}, true
		case d.IsInf() != 0:
			return num{inf: d.IsInf()}, true
		}
		coef, exp, err := d.BigInt()
		if err != nil {
			return num{}, false
		}
		if coef.CmpAbs(maxSignificand) > 0 {
			coef.SetInt64(0) // non-canonical (IEEE 754-2008): its value is zero
		}
		r := new(big.Rat).SetInt(coef)
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, -exp))), nil)
		if exp >= 0 {
			return num{r: r.Mul(r, new(big.Rat).SetInt(scale))}, true
		}
		return num{r: r.Quo(r, new(big.Rat).SetInt(scale))}, true
	}
	return num{}, false
}

// maxSignificand is the largest canonical Decimal128 significand,
// 10^34-1.
var maxSignificand = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(34), nil), big.NewInt(1))

// cmp orders two numbers that are not NaN: -1, 0 or +1.
func (a num) cmp(b num) int {
	if a.inf != 0 || b.inf != 0 {
		return cmp.Compare(a.inf, b.inf)
	}
	return a.r.Cmp(b.r)
}

// equal compares a stored value with a Go value as the server's $in and
// enum do: numbers by their exact value, whatever their types (NaN
// equals NaN), anything else by type and bytes.
func equal(v bson.RawValue, want any) bool { return same(v, raw(want)) }

// same is equal of two stored values.
func same(v, w bson.RawValue) bool {
	if a, ok := numberOf(v); ok {
		b, ok := numberOf(w)
		if !ok || a.nan || b.nan {
			return ok && a.nan == b.nan
		}
		return a.cmp(b) == 0
	}
	return v.Equal(w)
}

func inEnum(v bson.RawValue, enum []any) bool {
	for _, e := range enum {
		if equal(v, e) {
			return true
		}
	}
	return false
}

// codePoints counts the characters of s as the server does for minLength
// and maxLength (str::lengthInUTF8CodePoints): every byte but the UTF-8
// continuation bytes 0x80-0xBF, so invalid bytes of those values count 0.
func codePoints(s string) int {
	k := 0
	for i := range len(s) {
		if s[i]&0xC0 != 0x80 {
			k++
		}
	}
	return k
}
