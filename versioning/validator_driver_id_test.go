package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// AutoID has the common `_id,omitempty` id: Insert of one without an id
// lets the driver give it an ObjectID.
type AutoID struct {
	ID   string `bson:"_id,omitempty"`
	Name string `bson:"name"`
}

// Promise (versioning/validator.go, Repo.Validator): the validator lets
// "a collection in the middle of a migration ... run under
// validationAction "error"" and describes what the repository writes;
// Insert (write.go) documents "a value without an _id gets a new one".
//
// Reference: the driver's Collection.InsertOne (mongo/collection.go,
// ensureID, v2.10.0) prepends `_id: ObjectID(...)` to a document without
// one; Validator declares _id as T's "string", so the repository's own
// Insert of AutoID{Name: "a"} is refused under its own validator.
func TestValidatorAdmitsInsertWithoutID(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, _ := usersDB(t)
		r := newRepo[AutoID](t, db, p, versioning.Config{Collection: "users", Current: 1})
		v, err := r.Validator()
		require.NoError(t, err)
		require.NoError(t, validation.Apply(ctx, db, "users", v, validation.Strict, validation.Error))
		_, err = r.Insert(ctx, AutoID{Name: "a"})
		require.NoError(t, err, "the repository's own Insert under its own validator")
	})
}

// WithLabels has a typed inline map and declares neither the version nor
// the revision field.
type WithLabels struct {
	ID     string            `bson:"_id"`
	Name   string            `bson:"name"`
	Labels map[string]string `bson:",inline"`
}

// Promise (versioning/validator.go): "The version and revision fields are
// declared as the repository writes them, whatever T's fields of those
// names are (an int32 and an ObjectID, see [validation.Stamped])";
// validation.Stamped: "Where T does not [declare the field], nothing
// changes."
//
// Reference: stampDoc (versioning/commands.go) appends schemaVersion as an
// int32 and the revision as an ObjectID to every document Insert sends;
// with T's inline map of strings, For's schema has additionalProperties
// {bsonType: "string"}, which those two fields break: the document the
// repository inserts fails its own Validator. (Validate only: FerretDB 2.7
// cannot take additionalProperties, and FerretDB 1.24 has no validators.)
// Severity is low: Get cannot decode such a T either (the int32 version
// does not decode into the map's strings), so the type is unusable with
// the repository whatever its validator.
func TestValidatorAdmitsStampsBesideAnInlineMap(t *testing.T) {
	ctx := context.Background()
	db, coll := usersDB(t)
	r := newRepo[WithLabels](t, db, versioning.PlanFor(mongotest.Server()), versioning.Config{Collection: "users", Current: 1})
	v, err := r.Validator()
	require.NoError(t, err)
	_, err = r.Insert(ctx, WithLabels{ID: "a", Name: "Ada", Labels: map[string]string{"env": "prod"}})
	require.NoError(t, err)
	doc := stored(t, coll, "a")
	require.Nil(t, v.Validate(doc), "the document Insert stored: %s", doc)
}
