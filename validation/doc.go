// Package validation writes MongoDB collection validators from the Go
// types a service stores, measures what a validator would reject before
// it is enforced, and applies it so that it is really enforced.
//
// # Usage
//
// The calls a service makes, in order:
//
//	v, err := validation.For[User](
//		validation.Field("email", validation.Pattern(`^[^@\s]+@[^@\s]+\z`)),
//		validation.Field("age", validation.Minimum(0), validation.Maximum(150)),
//	)
//	rep, err := validation.Check(ctx, db.Collection("users"), v) // what it would reject: 2 commands
//	err = validation.Apply(ctx, db, "users", v, validation.Moderate, validation.Error)
//
// The sections below give how a type becomes a schema, what each server
// enforces, and what Check and Apply send.
//
// # A validator from a type
//
// [For] returns the $jsonSchema of T as the driver (go.mongodb.org/mongo-driver/v2
// v2.10.0) encodes T with its default registry and settings, or with the
// [Option]s that mirror the encoder's ([IntMinSize], [NilSliceAsEmpty],
// ...). It follows the bson tags: the name (the lower-cased Go name
// without one), omitempty, minsize, inline and "-". Every field the
// encoder always writes is required; a field it may omit (omitempty on a
// value that can be empty, an inlined struct pointer) is not. The
// registry's encoders decide, in its order: the exact type's, then the
// hooks, then the kind's:
//
//	time.Time, bson.DateTime                 "date"
//	url.URL                                  "string" (u.String())
//	json.Number                              ["long", "double"] (["int", "long", "double"] under minsize)
//	bson.ObjectID, bson.Decimal128           "objectId", "decimal"
//	[]byte, bson.Binary, bson.Vector         "binData"
//	bson.Raw, bsoncore.Document              "object"
//	bsoncore.Array                           "array"
//	bson.Timestamp, Regex, JavaScript,       "timestamp", "regex", "javascript",
//	Symbol, CodeWithScope, DBPointer,        "symbol", "javascriptWithScope", "dbPointer",
//	MinKey, MaxKey, Null, Undefined          "minKey", "maxKey", "null", "undefined"
//	bson.RawValue, interfaces                any type
//	a ValueMarshaler                         any type
//	a Marshaler                              "object" (a nil pointer of one: "null")
//	string, bool                             "string", "bool"
//	int8, int16, int32, uint8, uint16        "int"
//	int                                      ["int", "long"]: int32 when it fits, as the driver stores it
//	int64, uint32, uint64, uint              "long" (["int", "long"] under IntMinSize or minsize)
//	float32, float64                         "double"
//	[n]byte and named []byte                 "binData"
//	bson.D, [n]bson.E, bson.M, structs       "object", with properties and required
//	map[string]V                             "object", with additionalProperties: V
//	slices and arrays                        "array", with items
//	pointers, slices, maps                   the type of the value, and "null": the encoder writes nil as null
//
// A type with an encoder of its own matches only exactly: a named type
// of one (type ID bson.ObjectID) goes by its kind, as in the driver.
// The minsize tag reaches everything below its field (slice elements,
// map values, a nested struct's fields), as the driver hands it down.
// Under omitempty a nil pointer, slice or map is left out, never null,
// except a slice or map that is a Zeroer: its IsZero alone decides, so a
// nil one may be written as null; a fixed-size array is left out only at
// length 0, so it is required. Of fields with one name the shallowest
// wins (inline), and an inlined struct's own inline map is ignored, as in
// the driver. The root admits the _id that InsertOne adds to a document
// without one (an ObjectID): an _id that T may leave out (omitempty) may
// also be an "objectId", and a T with no _id but a typed inline map
// declares _id an "objectId" beside it. Channels,
// functions and complex numbers, which the driver cannot encode, and the
// types it refuses (two fields of one name at one depth, two inline
// maps) are refused with [patterns.ErrInvalid].
//
// # Constraints
//
// What a type cannot say is given once per field, in code, by the field's
// BSON path ("email", "address.city"), with [Field]:
//
//	v, err := validation.For[User](
//		validation.Field("email", validation.Pattern(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}\z`)),
//		validation.Field("role", validation.Enum("user", "admin", "moderator")),
//		validation.Field("age", validation.Minimum(0), validation.Maximum(150)),
//	)
//
// For checks each path against T and each constraint against the field's
// type (a pattern on a string, a minimum on a number...), so a renamed
// field or a wrong constraint fails at start-up, not in production. The
// field's bsonType stays beside an enum: the server's enum compares
// numbers by value (1, 1.0 and NumberLong(1) are one value), the type
// keeps the one the field stores. Numbers are kept exactly (an int64
// beyond 2^53 never goes through float64) and compared exactly, as the
// server compares int32, int64, double and Decimal128.
//
// # Two forms, one meaning
//
// MongoDB takes the whole $jsonSchema ([Validator.Document]). FerretDB
// 2.x has the core of it but answers FailedToParse to required, enum and
// additionalProperties: there the validator is the core $jsonSchema
// with the rest written as query operators beside it, {$and: [{$jsonSchema:
// core}, {$nor: [one filter per way to break the rest]}]}
// ([Validator.Portable]), which MongoDB accepts too. [Check] and [Apply]
// choose the form from the server's features ([patterns.FeatureJSONSchema],
// [patterns.FeatureValidators]); what the portable form cannot say (a map
// whose values have a type, a field name with a dot) is refused with
// [patterns.ErrUnsupported] before anything is sent,
// never dropped. [Validator.Validate] evaluates the validator in Go, with
// the server's meaning (tested against the server): it names the first
// failing field of a document.
//
// # Measured, then applied
//
// [Check] counts the documents a validator would reject and samples them,
// each with its first failing field: what switching validationAction to
// "error" would break. [Apply] creates the collection with the validator
// or sets it with collMod, then reads the collection's options back and
// fails unless the server kept exactly what was sent: a validator that
// looks applied but is not (FerretDB 2.x ignores one given at create) is
// an error, not a success.
//
// # Observing
//
// A validator made with the [Hook] option reports [Apply] and [Check]
// with it to that [patterns.Hook]: each call's start and end, with the
// ctx its commands use, its collection, its plan (native where the
// server has every $jsonSchema keyword, else portable, and the features
// it relies on), the commands sent, the transient failures sent again,
// and the outcome. Neither writes documents, so neither reports any. A
// validator without a hook costs nothing more, and nothing more is sent
// either way. A Check refused for a nil collection reports nothing.
package validation

import "github.com/mongopatterns/mongopatterns/internal/errs"

const pkg errs.Prefix = "validation"
