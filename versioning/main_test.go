package versioning_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/versioning"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// User is the current shape (version 3) of the users of the tests.
//
//	v1: {name: "Ada Lovelace", mail: "ada@example.com"}
//	v2: mail renamed to email
//	v3: name split into first and last; locale added, defaulting to "en"
type User struct {
	ID     string `bson:"_id"`
	First  string `bson:"first"`
	Last   string `bson:"last"`
	Email  string `bson:"email"`
	Locale string `bson:"locale"`
	Visits int    `bson:"visits"`
}

// renameMail is the migration from version 1 to 2.
func renameMail(d *versioning.Doc) error {
	d.Rename("mail", "email")
	return nil
}

// splitName is the migration from version 2 to 3.
func splitName(d *versioning.Doc) error {
	name, _ := d.Get("name")
	s, ok := name.(string)
	if !ok {
		return fmt.Errorf("name is %T, not a string", name)
	}
	first, last, _ := strings.Cut(s, " ")
	d.Delete("name")
	d.Set("first", first)
	d.Set("last", last)
	if _, ok := d.Get("locale"); !ok {
		d.Set("locale", "en")
	}
	return nil
}

func usersConfig() versioning.Config {
	return versioning.Config{
		Collection: "users",
		Current:    3,
		Migrations: []versioning.Migration{{From: 1, Up: renameMail}, {From: 2, Up: splitName}},
	}
}

// newRepo returns a repository of T over db with cfg, taking plan p.
func newRepo[T any](t testing.TB, db *mongo.Database, p versioning.Plan, cfg versioning.Config) *versioning.Repo[T] {
	t.Helper()
	r, err := versioning.New[T](db, cfg)
	require.NoError(t, err)
	versioning.ForcePlan(r, p)
	return r
}

// newUsers returns the users repository over db, taking plan p, with
// usersConfig edited by edit.
func newUsers(t testing.TB, db *mongo.Database, p versioning.Plan, edit ...func(*versioning.Config)) *versioning.Repo[User] {
	t.Helper()
	cfg := usersConfig()
	for _, e := range edit {
		e(&cfg)
	}
	return newRepo[User](t, db, p, cfg)
}

// serverPlan is the plan of the server in use: for tests whose subject
// does not depend on the plan, such as the benchmarks.
func serverPlan() versioning.Plan { return versioning.PlanFor(mongotest.Server()) }

// v1, v2 and v3 are stored documents as each release wrote them; v1
// carries no version field, as written before versioning was adopted.
func v1(id, name, mail string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "name", Value: name}, {Key: "mail", Value: mail}}
}

func v2(id, name, email string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "schemaVersion", Value: 2}, {Key: "name", Value: name}, {Key: "email", Value: email}}
}

func v3(id, first, last, email string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "schemaVersion", Value: 3}, {Key: "first", Value: first}, {Key: "last", Value: last}, {Key: "email", Value: email}, {Key: "locale", Value: "fr"}}
}

// usersDB returns a fresh database and its users collection.
func usersDB(t testing.TB) (*mongo.Database, *mongo.Collection) {
	t.Helper()
	db := mongotest.DB(t)
	return db, db.Collection("users")
}

// withAda returns a fresh database holding one current document, "a",
// the users repository over it taking plan p, and the document as stored.
func withAda(t testing.TB, p versioning.Plan) (*versioning.Repo[User], *mongo.Database, *mongo.Collection, bson.Raw) {
	t.Helper()
	db, coll := usersDB(t)
	r := newUsers(t, db, p)
	seed(t, coll, v3("a", "Ada", "Lovelace", "ada@example.com"))
	return r, db, coll, stored(t, coll, "a")
}

func seed(t testing.TB, coll *mongo.Collection, docs ...any) {
	t.Helper()
	_, err := coll.InsertMany(context.Background(), docs)
	require.NoError(t, err)
}

// seedNumbered stores n v1 documents u00, u01, ... with distinct names.
func seedNumbered(t testing.TB, coll *mongo.Collection, n int) {
	t.Helper()
	docs := make([]any, n)
	for i := range docs {
		docs[i] = v1(fmt.Sprintf("u%02d", i), fmt.Sprintf("User%02d Last", i), "u@example.com")
	}
	seed(t, coll, docs...)
}

// stored returns the document id as stored.
func stored(t testing.TB, coll *mongo.Collection, id any) bson.Raw {
	t.Helper()
	raw, err := coll.FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Raw()
	require.NoError(t, err)
	return raw
}

// keys returns the field names of raw, in order.
func keys(t testing.TB, raw bson.Raw) []string {
	t.Helper()
	elems, err := raw.Elements()
	require.NoError(t, err)
	var ks []string
	for _, e := range elems {
		ks = append(ks, e.Key())
	}
	return ks
}

var incVisits = bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}}
