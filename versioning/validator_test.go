package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// Member is User with visits optional: what the migrations from versions
// 1 and 2 produce is a valid Member.
type Member struct {
	ID     string `bson:"_id"`
	First  string `bson:"first"`
	Last   string `bson:"last"`
	Email  string `bson:"email"`
	Locale string `bson:"locale"`
	Visits int    `bson:"visits,omitempty"`
}

var emailRule = validation.Field("email", validation.Pattern(`^[^@]+@[^@]+$`))

// validated returns a fresh database whose users hold a v1, a v2 and a
// v3 document, under the repository's validator with validationAction
// "error", and the repository of Member over it taking plan p.
func validated(t *testing.T, p versioning.Plan) (*versioning.Repo[Member], *validation.Validator, *mongo.Database) {
	t.Helper()
	ctx := context.Background()
	db, coll := usersDB(t)
	seed(t, coll, v1("a", "Ada Lovelace", "ada@example.com"), v2("b", "Bob Smith", "bob@example.com"), v3("c", "Cy", "Young", "cy@example.com"))
	r := newRepo[Member](t, db, p, usersConfig())
	v, err := r.Validator(emailRule)
	require.NoError(t, err)
	rep, err := validation.Check(ctx, coll, v)
	require.NoError(t, err)
	require.Zero(t, rep.Rejected, "older versions pass as they are: %+v", rep.Sample)
	require.NoError(t, validation.Apply(ctx, db, "users", v, validation.Strict, validation.Error))
	return r, v, db
}

// Under validationAction "error", the lazy migration of Get writes back
// the current shape, which the validator accepts, and the eager one of
// MigrateAll migrates every older document.
func TestValidatorLetsMigrationsRun(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		t.Run("lazy", func(t *testing.T) {
			r, _, db := validated(t, p)
			m, err := r.Get(ctx, "a")
			require.NoError(t, err)
			require.Equal(t, "ada@example.com", m.Email)
			require.EqualValues(t, 3, stored(t, db.Collection("users"), "a").Lookup("schemaVersion").Int32(), "written back")
		})
		t.Run("eager", func(t *testing.T) {
			r, v, db := validated(t, p)
			res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
			require.NoError(t, err)
			require.Equal(t, 2, res.Migrated)
			st, err := r.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, map[int]int64{3: 3}, st.Versions)
			rep, err := validation.Check(ctx, db.Collection("users"), v)
			require.NoError(t, err)
			require.Zero(t, rep.Rejected)
		})
		t.Run("current shape enforced", func(t *testing.T) {
			r, _, db := validated(t, p)
			_, err := r.Insert(ctx, Member{ID: "d", First: "Dee", Email: "not an email"})
			require.Error(t, err)
			_, err = db.Collection("users").InsertOne(ctx, bson.D{{Key: "_id", Value: "e"}, {Key: "schemaVersion", Value: 3}, {Key: "first", Value: "Eve"}})
			require.Error(t, err, "a current document without its required fields")
			_, err = db.Collection("users").InsertOne(ctx, bson.D{{Key: "_id", Value: "f"}, {Key: "schemaVersion", Value: 2}, {Key: "whatever", Value: 1}})
			require.NoError(t, err, "an older version is stored as it is")
			_, err = r.Insert(ctx, Member{ID: "g", First: "Gus", Last: "G", Email: "gus@example.com", Locale: "en"})
			require.NoError(t, err)
		})
	})
}

// A migration whose output lacks a field T always writes (User's visits)
// is written back as T's encoding, which has it: Get and MigrateAll
// store a document the validator accepts.
func TestValidatorTakesAnIncompleteMigration(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db, coll := usersDB(t)
	seed(t, coll, v1("a", "Ada Lovelace", "ada@example.com"), v1("b", "Bob Smith", "bob@example.com"))
	r := newUsers(t, db, serverPlan())
	v, err := r.Validator()
	require.NoError(t, err)
	require.NoError(t, validation.Apply(ctx, db, "users", v, validation.Strict, validation.Error))
	_, err = r.Get(ctx, "a")
	require.NoError(t, err)
	res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Migrated)
	for _, id := range []string{"a", "b"} {
		doc := stored(t, coll, id)
		require.EqualValues(t, 0, doc.Lookup("visits").Int32(), "%s", doc)
		require.Nil(t, v.Validate(doc), "%s", doc)
	}
}

// Stamp holds the version field in a Go type other than the one the
// repository writes (an int32).
type Stamp struct {
	ID       string        `bson:"_id"`
	Name     string        `bson:"name"`
	Version  int64         `bson:"schemaVersion"`
	Revision bson.ObjectID `bson:"_rev"`
}

// The repository's own writes pass its validator, whatever Go types T
// gives the version and revision fields: Insert and Replace stamp an
// int32 version and an ObjectID revision, which the validator declares.
func TestValidatorTakesTheRepositorysStamps(t *testing.T) {
	ctx := context.Background()
	db, _ := usersDB(t)
	r := newRepo[Stamp](t, db, serverPlan(), versioning.Config{Collection: "users", Current: 1})
	v, err := r.Validator()
	require.NoError(t, err)
	require.Contains(t, bson.Raw(mustMarshal(t, v.Schema())).String(), `"schemaVersion": {"bsonType": "int"}`)
	stamped := func(id string) bson.Raw {
		return mustMarshal(t, bson.D{{Key: "_id", Value: id}, {Key: "name", Value: "n"}, {Key: "schemaVersion", Value: int32(1)}, {Key: "_rev", Value: bson.NewObjectID()}})
	}
	require.Nil(t, v.Validate(stamped("a")), "what Insert writes")
	mongotest.Require(t, patterns.FeatureValidators)
	require.NoError(t, validation.Apply(ctx, db, "users", v, validation.Strict, validation.Error))
	_, err = r.Insert(ctx, Stamp{ID: "a", Name: "Ada", Version: 7})
	require.NoError(t, err)
	require.NoError(t, r.Replace(ctx, "a", Stamp{ID: "a", Name: "Ada L"}))
	got, err := r.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "Ada L", got.Name)
}

func mustMarshal(t *testing.T, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	require.NoError(t, err)
	return b
}

// Counter counts visits in an int64: a migration that sets the Go
// constant 0 (stored as an int32) still decodes into it.
type Counter struct {
	ID     string `bson:"_id"`
	Visits int64  `bson:"visits"`
}

// The write-back of a migration stores T's encoding of the migrated
// document, which the validator accepts: Get and MigrateAll write visits
// as an int64, not the int32 the migration set; a field T does not
// declare (tenant) is kept as it was.
func TestMigrationWritesBackTsEncoding(t *testing.T) {
	ctx := context.Background()
	cfg := versioning.Config{Collection: "users", Current: 2, Migrations: []versioning.Migration{{From: 1, Up: func(d *versioning.Doc) error {
		d.Set("visits", 0)
		return nil
	}}}}
	for _, eager := range []bool{false, true} {
		db, coll := usersDB(t)
		seed(t, coll, bson.D{{Key: "_id", Value: "a"}, {Key: "tenant", Value: "acme"}})
		r := newRepo[Counter](t, db, serverPlan(), cfg)
		v, err := r.Validator()
		require.NoError(t, err)
		if mongotest.Server().Has(patterns.FeatureValidators) {
			require.NoError(t, validation.Apply(ctx, db, "users", v, validation.Strict, validation.Error))
		}
		if eager {
			_, err = r.MigrateAll(ctx, versioning.MigrateOptions{})
		} else {
			_, err = r.Get(ctx, "a")
		}
		require.NoError(t, err)
		doc := stored(t, coll, "a")
		require.Equal(t, bson.TypeInt64, doc.Lookup("visits").Type, "%s", doc)
		require.Equal(t, "acme", doc.Lookup("tenant").StringValue(), "a field T does not declare is kept: %s", doc)
		require.Nil(t, v.Validate(doc), "%s", doc)
		got, err := r.Get(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, Counter{ID: "a"}, got)
	}
}
