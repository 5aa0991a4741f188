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
// [For] returns the $jsonSchema of T as the driver (go.mongodb.org/mongo-driver/v2)
// encodes T with its default settings, or with the [Option]s that mirror the
// encoder's ([IntMinSize], [NilSliceAsEmpty], ...). It follows the bson
// tags: the name (the lower-cased Go name without one), omitempty, inline
// and "-". Every field the encoder always writes is required; a field it
// may omit (omitempty on a value that can be empty, an inlined struct
// pointer) is not. Go types map to bsonType:
//
//	string                      "string"
//	bool                        "bool"
//	int8, int16, int32, uint8,  "int"
//	uint16
//	int                         ["int", "long"]: int32 when it fits, as the driver stores it
//	int64, uint32, uint64, uint "long" (["int", "long"] under IntMinSize or the minsize tag)
//	float32, float64            "double"
//	time.Time, bson.DateTime    "date"
//	bson.ObjectID               "objectId"
//	bson.Decimal128             "decimal"
//	[]byte, bson.Binary         "binData"
//	slices and arrays           "array", with items
//	structs, bson.D, bson.M     "object", with properties and required
//	map[string]V                "object", with additionalProperties: V
//	pointers, slices, maps      the type of the value, and "null": the encoder writes nil as null
//	interfaces, bson.RawValue   any type
//
// A type with its own MarshalBSONValue or MarshalBSON may be encoded as
// anything, so it gets no bsonType. Channels, functions and complex
// numbers, which the driver cannot encode, are refused with
// [patterns.ErrInvalid].
//
// # Constraints
//
// What a type cannot say is given once per field, in code, by the field's
// BSON path ("email", "address.city"), with [Field]:
//
//	v, err := validation.For[User](
//		validation.Field("email", validation.Pattern(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`)),
//		validation.Field("role", validation.Enum("user", "admin", "moderator")),
//		validation.Field("age", validation.Minimum(0), validation.Maximum(150)),
//	)
//
// For checks each path against T and each constraint against the field's
// type (a pattern on a string, a minimum on a number...), so a renamed
// field or a wrong constraint fails at start-up, not in production. An
// enum stands in for the field's bsonType, which its values already fix.
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
package validation

import "github.com/mongopatterns/mongopatterns/internal/errs"

const pkg errs.Prefix = "validation"
