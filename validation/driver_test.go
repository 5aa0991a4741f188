package validation_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// The hooks of the driver's registry, each on a type of its own.
type (
	// valueMarshaler writes a string through MarshalBSONValue.
	valueMarshaler struct{ S string }
	// docMarshaler writes a document through MarshalBSON (value receiver).
	docMarshaler struct{ S string }
	// ptrDocMarshaler has MarshalBSON on its pointer only.
	ptrDocMarshaler struct{ S string }
	// zeroer says when it is empty.
	zeroer struct{ N int }
	// myOID is a named ObjectID: no type encoder matches it.
	myOID bson.ObjectID
)

func (v valueMarshaler) MarshalBSONValue() (byte, []byte, error) {
	return byte(bson.TypeString), bsoncore.AppendString(nil, v.S), nil
}

func (d docMarshaler) MarshalBSON() ([]byte, error) {
	return bson.Marshal(bson.D{{Key: "s", Value: d.S}})
}

// MarshalBSON is called on a nil pointer too (marshalerEncodeValue
// writes null only for a value-receiver Marshaler).
func (d *ptrDocMarshaler) MarshalBSON() ([]byte, error) {
	if d == nil {
		return bson.Marshal(bson.D{})
	}
	return bson.Marshal(bson.D{{Key: "t", Value: d.S}})
}

func (z zeroer) IsZero() bool { return z.N == 0 }

// driverRule is one rule of the driver's encoder (go.mongodb.org/mongo-driver/v2
// v2.10.0, package bson): a field of type typ with the bson tag tag,
// under the encoder settings enc (mirrored by opts), has the bsonType
// want at the schema path at inside the field's schema ("" for the
// field; "items", "additionalProperties", "properties.x"), and is
// required or not. Each sample, encoded by the driver in such a field,
// must pass Validate and, at path "", be of one of the types want.
type driverRule struct {
	source   string // where the driver says so
	typ      reflect.Type
	tag      string
	enc      func(*bson.Encoder)
	opts     []validation.Option
	at       string
	want     []string // nil: any type (no bsonType)
	optional bool
	samples  []any
}

func driverRules() []driverRule {
	oid := bson.NewObjectIDFromTimestamp(time.Unix(1, 0))
	str := "s"
	u, _ := url.Parse("https://example.com/a?b=c")
	doc := bsoncore.NewDocumentBuilder().AppendInt32("a", 1).Build()
	arr := bsoncore.NewArrayBuilder().AppendInt32(1).Build()
	minSize := func(e *bson.Encoder) { e.IntMinSize() }
	typeOf := reflect.TypeOf
	return []driverRule{
		// Type encoders (registerDefaultEncoders, registerPrimitiveCodecs).
		{source: "byteSliceCodec: nil is null", typ: typeOf([]byte(nil)), want: []string{"binData", "null"}, samples: []any{[]byte(nil), []byte{1}}},
		{source: "byteSliceCodec: NilByteSliceAsEmpty", typ: typeOf([]byte(nil)), enc: (*bson.Encoder).NilByteSliceAsEmpty, opts: []validation.Option{validation.NilByteSliceAsEmpty()}, want: []string{"binData"}, samples: []any{[]byte(nil)}},
		{source: "timeCodec", typ: typeOf(time.Time{}), want: []string{"date"}, samples: []any{time.Time{}, time.Unix(5, 0)}},
		{source: "emptyInterfaceCodec: the dynamic value's encoder, nil is null", typ: reflect.TypeFor[any](), want: nil, samples: []any{nil, 1, "x"}},
		{source: "arrayCodec: bsoncore.Array", typ: typeOf(arr), want: []string{"array"}, samples: []any{arr}},
		{source: "objectIDEncodeValue", typ: typeOf(oid), want: []string{"objectId"}, samples: []any{oid}},
		{source: "decimal128EncodeValue", typ: typeOf(bson.Decimal128{}), want: []string{"decimal"}, samples: []any{bson.NewDecimal128(0, 1)}},
		{source: "jsonNumberEncodeValue: an int64 (intEncodeValue), else a double", typ: typeOf(json.Number("")), want: []string{"long", "double"}, samples: []any{json.Number("1"), json.Number("1.5"), json.Number("9007199254740993")}},
		{source: "jsonNumberEncodeValue: intEncodeValue honours minsize", typ: typeOf(json.Number("")), tag: "minsize", want: []string{"int", "long", "double"}, samples: []any{json.Number("1"), json.Number("1e300"), json.Number("4294967296")}},
		{source: "urlEncodeValue: u.String()", typ: typeOf(url.URL{}), want: []string{"string"}, samples: []any{*u, url.URL{}}},
		{source: "urlEncodeValue under pointerCodec", typ: typeOf(u), want: []string{"string", "null"}, samples: []any{u, (*url.URL)(nil)}},
		{source: "javaScriptEncodeValue", typ: typeOf(bson.JavaScript("")), want: []string{"javascript"}, samples: []any{bson.JavaScript("1")}},
		{source: "symbolEncodeValue", typ: typeOf(bson.Symbol("")), want: []string{"symbol"}, samples: []any{bson.Symbol("s")}},
		{source: "binaryEncodeValue", typ: typeOf(bson.Binary{}), want: []string{"binData"}, samples: []any{bson.Binary{Subtype: 4, Data: make([]byte, 16)}}},
		{source: "vectorEncodeValue: subtype 9", typ: typeOf(bson.Vector{}), want: []string{"binData"}, samples: []any{bson.NewVector([]int8{1, 2})}},
		{source: "undefinedEncodeValue", typ: typeOf(bson.Undefined{}), want: []string{"undefined"}, samples: []any{bson.Undefined{}}},
		{source: "dateTimeEncodeValue", typ: typeOf(bson.DateTime(0)), want: []string{"date"}, samples: []any{bson.DateTime(7)}},
		{source: "nullEncodeValue", typ: typeOf(bson.Null{}), want: []string{"null"}, samples: []any{bson.Null{}}},
		{source: "regexEncodeValue", typ: typeOf(bson.Regex{}), want: []string{"regex"}, samples: []any{bson.Regex{Pattern: "a"}}},
		{source: "dbPointerEncodeValue", typ: typeOf(bson.DBPointer{}), want: []string{"dbPointer"}, samples: []any{bson.DBPointer{DB: "d", Pointer: oid}}},
		{source: "timestampEncodeValue", typ: typeOf(bson.Timestamp{}), want: []string{"timestamp"}, samples: []any{bson.Timestamp{T: 1, I: 2}}},
		{source: "minKeyEncodeValue", typ: typeOf(bson.MinKey{}), want: []string{"minKey"}, samples: []any{bson.MinKey{}}},
		{source: "maxKeyEncodeValue", typ: typeOf(bson.MaxKey{}), want: []string{"maxKey"}, samples: []any{bson.MaxKey{}}},
		{source: "coreDocumentEncodeValue", typ: typeOf(doc), want: []string{"object"}, samples: []any{doc}},
		{source: "codeWithScopeEncodeValue", typ: typeOf(bson.CodeWithScope{}), want: []string{"javascriptWithScope"}, samples: []any{bson.CodeWithScope{Code: "1", Scope: bson.D{}}}},
		{source: "rawEncodeValue", typ: typeOf(bson.Raw{}), want: []string{"object"}, samples: []any{bson.Raw(doc)}},
		{source: "rawValueEncodeValue: its own type", typ: typeOf(bson.RawValue{}), want: nil, samples: []any{bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, "x")}}},
		{source: "type encoders match the exact type: a named ObjectID goes by its kind, an array of bytes", typ: typeOf(myOID{}), want: []string{"binData"}, samples: []any{myOID(oid)}},

		// Kind encoders.
		{source: "booleanEncodeValue", typ: typeOf(false), want: []string{"bool"}, samples: []any{true}},
		{source: "intEncodeValue: int is int32 when it fits", typ: typeOf(0), want: []string{"int", "long"}, samples: []any{1, 1 << 40}},
		{source: "intEncodeValue: int8, int16, int32", typ: typeOf(int16(0)), want: []string{"int"}, samples: []any{int16(-3)}},
		{source: "intEncodeValue: int64", typ: typeOf(int64(0)), want: []string{"long"}, samples: []any{int64(1)}},
		{source: "intEncodeValue: int64 under the minsize tag", typ: typeOf(int64(0)), tag: "minsize", want: []string{"int", "long"}, samples: []any{int64(1), int64(1) << 40}},
		{source: "intEncodeValue: int64 under Encoder.IntMinSize", typ: typeOf(int64(0)), enc: minSize, opts: []validation.Option{validation.IntMinSize()}, want: []string{"int", "long"}, samples: []any{int64(1)}},
		{source: "uintCodec: uint8, uint16", typ: typeOf(uint16(0)), want: []string{"int"}, samples: []any{uint16(65535)}},
		{source: "uintCodec: uint, uint32, uint64", typ: typeOf(uint32(0)), want: []string{"long"}, samples: []any{uint32(1)}},
		{source: "uintCodec: minsize", typ: typeOf(uint64(0)), tag: "minsize", want: []string{"int", "long"}, samples: []any{uint64(1), uint64(1) << 40}},
		{source: "floatEncodeValue", typ: typeOf(float32(0)), want: []string{"double"}, samples: []any{float32(1.5)}},
		{source: "stringCodec", typ: typeOf(""), want: []string{"string"}, samples: []any{""}},
		{source: "arrayEncodeValue: [n]byte is binary", typ: typeOf([3]byte{}), want: []string{"binData"}, samples: []any{[3]byte{1}}},
		{source: "arrayEncodeValue: [n]E is a document", typ: typeOf([1]bson.E{}), want: []string{"object"}, samples: []any{[1]bson.E{{Key: "k", Value: 1}}}},
		{source: "arrayEncodeValue", typ: typeOf([2]string{}), want: []string{"array"}, samples: []any{[2]string{"a", "b"}}},
		{source: "mapCodec: nil is null", typ: typeOf(map[string]int32{}), want: []string{"object", "null"}, samples: []any{map[string]int32(nil), map[string]int32{"a": 1}}},
		{source: "mapCodec: NilMapAsEmpty", typ: typeOf(map[string]int32{}), enc: (*bson.Encoder).NilMapAsEmpty, opts: []validation.Option{validation.NilMapAsEmpty()}, want: []string{"object"}, samples: []any{map[string]int32(nil)}},
		{source: "sliceCodec: nil is null", typ: typeOf([]string{}), want: []string{"array", "null"}, samples: []any{[]string(nil), []string{"a"}}},
		{source: "sliceCodec: NilSliceAsEmpty", typ: typeOf([]string{}), enc: (*bson.Encoder).NilSliceAsEmpty, opts: []validation.Option{validation.NilSliceAsEmpty()}, want: []string{"array"}, samples: []any{[]string(nil)}},
		{source: "sliceCodec: a named []byte is binary", typ: typeOf(Blob{}), want: []string{"binData", "null"}, samples: []any{Blob{1}, Blob(nil)}},
		{source: "sliceCodec: convertible to D is a document", typ: typeOf(bson.D{}), want: []string{"object", "null"}, samples: []any{bson.D{{Key: "a", Value: 1}}, bson.D(nil)}},
		{source: "structCodec", typ: typeOf(struct{ X string }{}), want: []string{"object"}, samples: []any{struct{ X string }{}}},
		{source: "pointerCodec: nil is null", typ: typeOf(&str), want: []string{"string", "null"}, samples: []any{&str, (*string)(nil)}},

		// Hooks (Registry.lookupInterfaceEncoder, before the kinds).
		{source: "valueMarshalerEncodeValue: the type it returns", typ: typeOf(valueMarshaler{}), want: nil, samples: []any{valueMarshaler{"x"}}},
		{source: "marshalerEncodeValue: a document", typ: typeOf(docMarshaler{}), want: []string{"object"}, samples: []any{docMarshaler{"x"}}},
		{source: "marshalerEncodeValue: a nil pointer of a Marshaler is null (isImplementationNil)", typ: typeOf(&docMarshaler{}), want: []string{"object", "null"}, samples: []any{&docMarshaler{"x"}, (*docMarshaler)(nil)}},
		{source: "condAddrEncoder: a pointer-receiver Marshaler where addressable, the struct codec elsewhere: a document of any shape", typ: typeOf(ptrDocMarshaler{}), want: []string{"object"}, samples: []any{ptrDocMarshaler{"x"}}},
		{source: "isEmpty: a Zeroer decides omitempty", typ: typeOf(zeroer{}), tag: "omitempty", want: []string{"object"}, optional: true, samples: []any{zeroer{}, zeroer{1}}},

		// Struct tags (structCodec.EncodeValue, isEmpty).
		{source: "isEmpty: a struct is never empty without OmitZeroStruct", typ: typeOf(struct{ X string }{}), tag: "omitempty", want: []string{"object"}, samples: []any{struct{ X string }{}}},
		{source: "isEmpty: OmitZeroStruct omits a struct of empty fields", typ: typeOf(struct{ X string }{}), tag: "omitempty", enc: (*bson.Encoder).OmitZeroStruct, opts: []validation.Option{validation.OmitZeroStruct()}, want: []string{"object"}, optional: true, samples: []any{struct{ X string }{}}},
		{source: "isEmpty: an array is empty only at length 0", typ: typeOf([16]byte{}), tag: "omitempty", want: []string{"binData"}, samples: []any{[16]byte{}}},
		{source: "isEmpty: under OmitZeroStruct, a struct holding a non-empty array is never empty", typ: typeOf(struct{ U [2]int32 }{}), tag: "omitempty", enc: (*bson.Encoder).OmitZeroStruct, opts: []validation.Option{validation.OmitZeroStruct()}, want: []string{"object"}, samples: []any{struct{ U [2]int32 }{}}},
		{source: "isEmpty: omitempty leaves a nil pointer out, so it is never null", typ: typeOf(&str), tag: "omitempty", want: []string{"string"}, optional: true, samples: []any{&str, (*string)(nil)}},
		{source: "isEmpty: omitempty leaves a nil slice out", typ: typeOf([]string{}), tag: "omitempty", want: []string{"array"}, optional: true, samples: []any{[]string(nil)}},
		{source: "isEmpty: omitempty leaves a nil map out", typ: typeOf(map[string]string{}), tag: "omitempty", want: []string{"object"}, optional: true, samples: []any{map[string]string(nil)}},
		{source: "Encoder.OmitEmpty: every field of the document omitempty", typ: typeOf(""), enc: (*bson.Encoder).OmitEmpty, opts: []validation.Option{validation.OmitEmpty()}, want: []string{"string"}, optional: true, samples: []any{""}},
		{source: "Encoder.OmitEmpty is not handed to a nested struct's fields (structCodec's EncodeContext)", typ: typeOf(struct{ X string }{}), enc: (*bson.Encoder).OmitEmpty, opts: []validation.Option{validation.OmitEmpty()}, at: "required", want: []string{"x"}, samples: []any{struct{ X string }{}}},

		// minsize below a field (structCodec hands EncodeContext.minSize down).
		{source: "minsize reaches slice elements (sliceCodec passes the context)", typ: typeOf([]int64{}), tag: "minsize", at: "items", want: []string{"int", "long"}, samples: []any{[]int64{1, 1 << 40}}},
		{source: "minsize reaches array elements", typ: typeOf([2]uint32{}), tag: "minsize", at: "items", want: []string{"int", "long"}, samples: []any{[2]uint32{1, 1 << 31}}},
		{source: "minsize reaches map values (mapCodec)", typ: typeOf(map[string]int64{}), tag: "minsize", at: "additionalProperties", want: []string{"int", "long"}, samples: []any{map[string]int64{"a": 1}}},
		{source: "minsize reaches a nested struct's fields", typ: typeOf(struct{ X int64 }{}), tag: "minsize", at: "properties.x", want: []string{"int", "long"}, samples: []any{struct{ X int64 }{1}}},
		{source: "minsize reaches a pointer's value (pointerCodec)", typ: typeOf(new(int64)), tag: "minsize", want: []string{"int", "long", "null"}, samples: []any{new(int64)}},
	}
}

// TestForFollowsTheDriver: one row per rule of the driver's default
// registry and struct codec; For gives the field the BSON types the
// rule writes, and what the driver writes passes Validate.
func TestForFollowsTheDriver(t *testing.T) {
	for _, r := range driverRules() {
		t.Run(r.source, func(t *testing.T) {
			tag := "f"
			if r.tag != "" {
				tag += "," + r.tag
			}
			st := reflect.StructOf([]reflect.StructField{{Name: "F", Type: r.typ, Tag: reflect.StructTag(`bson:"` + tag + `"`)}})
			v, err := validation.ForType(st, r.opts...)
			require.NoError(t, err)
			schema := bson.Raw(mustMarshal(t, v.Schema()))
			_, reqErr := schema.LookupErr("required")
			require.Equal(t, r.optional, reqErr != nil, "required: %s", schema)
			at := []string{"properties", "f"}
			if r.at != "" {
				at = append(at, strings.Split(r.at, ".")...)
			}
			if r.at != "required" {
				at = append(at, "bsonType")
			}
			got, err := schema.LookupErr(at...)
			if r.want == nil {
				require.Error(t, err, "any type: %s", schema)
			} else {
				require.NoError(t, err, "%s", schema)
				var types []string
				if s, ok := got.StringValueOK(); ok {
					types = []string{s}
				} else {
					require.NoError(t, got.Unmarshal(&types))
				}
				require.Equal(t, r.want, types)
			}
			for _, s := range r.samples {
				x := reflect.New(st).Elem()
				if s != nil {
					x.Field(0).Set(reflect.ValueOf(s))
				}
				var buf bytes.Buffer
				vw := bson.NewDocumentWriter(&buf)
				enc := bson.NewEncoder(vw)
				if r.enc != nil {
					r.enc(enc)
				}
				require.NoError(t, enc.Encode(x.Interface()))
				raw := bson.Raw(buf.Bytes())
				require.Nil(t, v.Validate(raw), "%s", raw)
				if f, err := raw.LookupErr("f"); err == nil && r.at == "" && r.want != nil {
					require.Contains(t, r.want, validation.TypeName(f.Type), "%s", raw)
				}
			}
		})
	}
}

type (
	InlineA   struct{ X string }
	InlineB   struct{ X int32 }
	Dominated struct {
		A InlineA `bson:",inline"`
		B InlineB `bson:",inline"`
		X bool    `bson:"x"`
	}
	Tied struct {
		A InlineA `bson:",inline"`
		B InlineB `bson:",inline"`
	}
	WithMap struct {
		Extra map[string]int32 `bson:",inline"`
		Y     string           `bson:"y"`
	}
	OuterMap struct {
		M map[string]string `bson:",inline"`
		W WithMap           `bson:",inline"`
	}
)

// The struct codec's inline rules (structCodec.describeStructSlow): of
// fields with one name the shallowest wins (dominantField), two at that
// depth make the type unencodable; an inlined struct's own inline map is
// ignored, only the outer struct's takes the other fields.
func TestForFollowsTheDriversInlineRules(t *testing.T) {
	v, err := validation.For[Dominated]()
	require.NoError(t, err, "the top-level x dominates the inlined ones")
	raw := mustMarshal(t, Dominated{X: true})
	require.Nil(t, v.Validate(raw), "%s", bson.Raw(raw))
	require.Equal(t, `{"bsonType": "object","required": ["x"],"properties": {"x": {"bsonType": "bool"}}}`, bson.Raw(mustMarshal(t, v.Schema())).String())

	_, err = bson.Marshal(Tied{})
	require.Error(t, err, "the driver refuses two x at one depth")
	_, err = validation.For[Tied]()
	require.ErrorIs(t, err, patterns.ErrInvalid)

	v, err = validation.For[OuterMap]()
	require.NoError(t, err)
	raw = mustMarshal(t, OuterMap{M: map[string]string{"s": "x"}, W: WithMap{Extra: map[string]int32{"n": 1}, Y: "y"}})
	require.NotContains(t, bson.Raw(raw).String(), `"n"`, "the driver ignores the inner inline map")
	require.Nil(t, v.Validate(raw), "%s", bson.Raw(raw))
}
