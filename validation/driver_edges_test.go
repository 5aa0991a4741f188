package validation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// Promise (validation/options.go, Pattern): "[Validator.Validate] [matches]
// with Go's regexp, on re rewritten where the two read shared syntax
// differently, so that both give one verdict"; Validate "evaluates v on doc
// in Go, as the server evaluates [Validator.Document]" (eval.go).
//
// Reference: PCRE2 (pcre2pattern, "Circumflex and dollar"): in multiline
// mode "the circumflex matches immediately after internal newlines as well
// as at the start of the subject. It does not match after a newline that
// ends the string, for compatibility with Perl." Go's (?m)^ matches after
// every \n, a final one too. (?m) is shared syntax; For now refuses a ^
// that may stand at the end of the subject, and keeps the others, whose
// meaning is the same in both.
func TestMultilineCaretAfterFinalNewline(t *testing.T) {
	// A ^ that may stand at the end of the subject is refused: nothing
	// in Go's syntax says "not at the end".
	for _, re := range []string{`(?m)^$`, `(?m)\n^`, `(?m)^\z`, `(?m)a|^`, `(?m)(^)*`} {
		_, err := validation.For[Text](validation.Field("s", validation.Pattern(re)))
		require.ErrorIs(t, err, patterns.ErrInvalid, re)
	}
	// One followed by a character both read alike.
	cases := []struct {
		pattern, s string
		valid      bool
	}{
		{`(?m)^a`, "b\na", true},
		{`(?m)^.`, "a\n", true},
		{`(?m)\n^.`, "a\n", false}, // no character after the final newline
		{`(?m)^[a-z]+$`, "1\nab\n", true},
		{`(?m)^(x|y)`, "a\n", false},
	}
	var vs []verdict
	for i, c := range cases {
		v, err := validation.For[Text](validation.Field("s", validation.Pattern(c.pattern)))
		require.NoError(t, err, c.pattern)
		vs = append(vs, verdict{fmt.Sprintf("%s on %q", c.pattern, c.s), v, mustMarshal(t, Text{ID: i, S: c.s}), c.valid})
	}
	requireVerdicts(t, vs)
}

// StringID has the common `_id,omitempty` string id: the driver's
// InsertOne adds an ObjectID _id when it is empty.
type StringID struct {
	ID   string `bson:"_id,omitempty"`
	Name string `bson:"name"`
}

// Promise (doc.go): "[For] returns the $jsonSchema of T as the driver
// (go.mongodb.org/mongo-driver/v2 v2.10.0) encodes T"; "Every field the
// encoder always writes is required; a field it may omit (omitempty on a
// value that can be empty ...) is not."
//
// Reference: the driver's Collection.InsertOne (mongo/collection.go,
// insert -> ensureID, v2.10.0) adds `_id: ObjectID(...)` to a document that
// has none, which is what omitempty leaves out of StringID{Name: "a"}. The
// validator declares _id as bsonType "string", so the write the driver
// makes of StringID{Name: "a"} is refused.
func TestOmitemptyIDAdmitsTheDriversObjectID(t *testing.T) {
	v, err := validation.For[StringID]()
	require.NoError(t, err)
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection("attack_sid")
	_, err = coll.InsertOne(ctx, StringID{Name: "a"}) // no validator yet: what the driver stores
	require.NoError(t, err)
	stored, err := coll.FindOne(ctx, bson.D{}).Raw()
	require.NoError(t, err)
	require.Nil(t, v.Validate(stored), "the driver stored %s", stored)
	requireVerdicts(t, []verdict{{"StringID{Name: a} as InsertOne stores it", v, stored, true}})
}

// Labeled has a typed inline map and no _id field.
type Labeled struct {
	Name   string            `bson:"name"`
	Labels map[string]string `bson:",inline"`
}

// Promise (doc.go): For gives T's schema "as the driver encodes T"; the
// inline map's values become additionalProperties. Reference: InsertOne
// (ensureID) adds _id as an ObjectID to Labeled's encoding; the validator's
// additionalProperties {bsonType: "string"} refuses it, so no Labeled can
// be inserted under the validator. (Server part: only where the full
// $jsonSchema is sent; FerretDB 2.7 refuses additionalProperties.)
func TestInlineMapAdmitsTheDriversID(t *testing.T) {
	v, err := validation.For[Labeled]()
	require.NoError(t, err)
	doc := mustMarshal(t, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "name", Value: "a"}, {Key: "env", Value: "prod"}})
	require.Nil(t, v.Validate(doc), "a Labeled as InsertOne stores it: %s", bson.Raw(doc))
}

// Tags is a slice that says itself when it is empty: nil means "unset
// but not empty" here, so omitempty keeps it.
type Tags []string

func (t Tags) IsZero() bool { return t != nil && len(t) == 0 }

type Tagged struct {
	ID   int  `bson:"_id"`
	Tags Tags `bson:"tags,omitempty"`
}

// Promise (doc.go): "Under omitempty a nil pointer, slice or map is left
// out, never null"; For follows "the hooks (... Zeroer ...)".
//
// Reference: struct_codec.go isEmpty (v2.10.0): "if (kind != reflect.Ptr
// || !v.IsNil()) && v.Type().Implements(tZeroer) { return
// v.Interface().(Zeroer).IsZero() }" — for a slice (not a pointer) the
// Zeroer decides; a nil Tags is not empty, so it is written, and the
// slice codec writes a nil slice as null. The validator refuses that null.
func TestZeroerSliceWrittenAsNull(t *testing.T) {
	v, err := validation.For[Tagged]()
	require.NoError(t, err)
	doc := mustMarshal(t, Tagged{ID: 1})
	require.Contains(t, bson.Raw(doc).String(), `"tags": null`, "the driver writes")
	require.Nil(t, v.Validate(doc), "the driver wrote %s", bson.Raw(doc))
	requireVerdicts(t, []verdict{{"Tagged{ID: 1}", v, doc, true}})
}

// serverSays inserts each document under Apply's validator and requires
// the server's verdict to be the one given (where validators are enforced):
// the server's half of requireVerdicts, so that its verdict shows even when
// Validate's differs.
func serverSays(t *testing.T, vs []verdict) {
	t.Helper()
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	p := validation.PlanFor(mongotest.Server())
	for i, c := range vs {
		name := fmt.Sprintf("s%d", i)
		require.NoError(t, validation.ApplyPlan(ctx, db, name, c.v, "", "", p))
		_, err := db.Collection(name).InsertOne(ctx, c.doc)
		assert.Equal(t, c.valid, err == nil, "%s: the server says %v", c.name, err)
	}
}

// The server's verdicts alone, for the cases above.
func TestServerVerdictsOnDriverEdges(t *testing.T) {
	var vs []verdict
	for i, c := range []struct {
		pattern, s string
		valid      bool
	}{{`(?m)\n^.`, "a\n", false}, {`(?m)^[a-z]+$`, "1\nab\n", true}} {
		v, err := validation.For[Text](validation.Field("s", validation.Pattern(c.pattern)))
		require.NoError(t, err)
		vs = append(vs, verdict{fmt.Sprintf("%s on %q", c.pattern, c.s), v, mustMarshal(t, Text{ID: i, S: c.s}), c.valid})
	}
	sid, err := validation.For[StringID]()
	require.NoError(t, err)
	vs = append(vs, verdict{"StringID as InsertOne stores it", sid, mustMarshal(t, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "name", Value: "a"}}), true})
	tg, err := validation.For[Tagged]()
	require.NoError(t, err)
	vs = append(vs, verdict{"Tagged{ID: 1}", tg, mustMarshal(t, Tagged{ID: 1}), true})
	serverSays(t, vs)
}

// Promise (doc.go): "[Validator.Validate] evaluates the validator in Go,
// with the server's meaning (tested against the server)"; Pattern: both
// "give one verdict".
//
// Reference: the server matches a pattern with PCRE2 in UTF mode; PCRE2
// (pcre2api, "pcre2_match", and pcre2unicode "Validity of UTF strings")
// checks the subject first and answers a negative error
// (PCRE2_ERROR_UTF8_*) for invalid UTF-8, which the server counts as no
// match. Go's regexp reads each invalid byte as U+FFFD and matches. The
// driver writes a Go string's bytes as they are, so Text{S: "a\xffb"} is
// stored (FerretDB 2.7 stores it without a validator) and, under pattern
// ^a, refused by the server and admitted by Validate.
func TestPatternOnInvalidUTF8MatchesNothing(t *testing.T) {
	v, err := validation.For[Text](validation.Field("s", validation.Pattern(`^a`)))
	require.NoError(t, err)
	vs := []verdict{{`^a on "a\xffb"`, v, mustMarshal(t, Text{ID: 1, S: "a\xffb"}), false}}
	for _, c := range vs {
		assert.Equal(t, c.valid, c.v.Validate(c.doc) == nil, "%s: Validate says %v", c.name, c.v.Validate(c.doc))
	}
	serverSays(t, vs)
}

// Promise (options.go): "MaxLength requires a string of at most k
// characters (code points)"; Validate evaluates "with the server's
// meaning".
//
// Reference: mongodb/mongo
// src/mongo/db/matcher/schema/expression_internal_schema_str_length.h
// counts with str::lengthInUTF8CodePoints (src/mongo/util/str.h): "strLen
// += !isUTF8ContinuationByte(byte)", so the bytes 0x80-0xBF count 0. Go's
// utf8.RuneCountInString, which eval uses, counts each invalid byte as one.
// The driver writes "a\x80\x80" as it is; MongoDB counts 1 and accepts it
// under maxLength 1, Validate counts 3 and refuses it.
func TestLengthCountsAsTheServer(t *testing.T) {
	v, err := validation.For[Text](validation.Field("s", validation.MaxLength(1)))
	require.NoError(t, err)
	vs := []verdict{{`maxLength 1 on "a\x80\x80"`, v, mustMarshal(t, Text{ID: 1, S: "a\x80\x80"}), true}}
	for _, c := range vs {
		assert.Equal(t, c.valid, c.v.Validate(c.doc) == nil, "%s: Validate says %v", c.name, c.v.Validate(c.doc))
	}
	// No server half: FerretDB 2.7 answers "invalid utf8 i: 1" here, not
	// MongoDB's verdict.
}
