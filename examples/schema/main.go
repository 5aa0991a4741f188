// Command schema shows schema validation generated from Go types: the
// users collection of the design documents' "Schema Validation" section,
// whose validator comes out of the User struct below; it is measured
// with validation.Check against the documents already stored, then
// applied with validation.Apply and enforced.
//
//	go -C examples run ./schema
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// User is a document of the users collection. Fields without omitempty
// are always written, so the validator requires them.
type User struct {
	ID        bson.ObjectID `bson:"_id,omitempty"`
	Email     string        `bson:"email"`
	Name      string        `bson:"name"`
	CreatedAt time.Time     `bson:"created_at"`
	Role      string        `bson:"role,omitempty"`
	Age       int32         `bson:"age,omitempty"`
}

// rules are what the type cannot say, given once per field.
var rules = []validation.Option{
	validation.Field("email", validation.Pattern(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}\z`)),
	validation.Field("role", validation.Enum("user", "admin", "moderator")),
	validation.Field("age", validation.Minimum(0), validation.Maximum(150)),
}

func main() { demo.Run("example_schema", run) }

func run(ctx context.Context, db *mongo.Database) error {
	// OnlyConstrained gives the design documents' validator keyword for
	// keyword; without it, every field's type is checked too.
	v, err := validation.For[User](append(rules, validation.OnlyConstrained())...)
	if err != nil {
		return err
	}
	js, err := bson.MarshalExtJSONIndent(v.Document(), false, false, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("validator generated from User:\n%s\n", js)

	// What the collection holds before the validator: two documents
	// written by code that predates it are not valid.
	users := db.Collection("users")
	now := time.Now().UTC().Truncate(time.Millisecond)
	stored := []any{
		User{Email: "ada@example.com", Name: "Ada", CreatedAt: now, Role: "admin", Age: 36},
		User{Email: "grace@example.com", Name: "Grace", CreatedAt: now},
		bson.D{{Key: "email", Value: "alan@example"}, {Key: "name", Value: "Alan"}, {Key: "created_at", Value: now}},
		bson.D{{Key: "email", Value: "linus@example.com"}, {Key: "name", Value: "Linus"}, {Key: "created_at", Value: now}, {Key: "role", Value: "root"}},
	}
	if _, err := users.InsertMany(ctx, stored); err != nil {
		return err
	}

	// Measure before enforcing: what would validationAction "error" break?
	rep, err := validation.Check(ctx, users, v)
	if errors.Is(err, patterns.ErrUnsupported) {
		fmt.Printf("this server cannot enforce it: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("Check: %d of %d documents would be rejected\n", rep.Rejected, len(stored))
	for _, r := range rep.Sample {
		fmt.Printf("  %s: %s\n", r.ID, r.Error())
	}

	// Apply it. Moderate leaves the documents already invalid updatable
	// until they are fixed; every insert, and every update of a valid
	// document, is checked. Apply reads the options back: it fails rather
	// than leave a validator that is not in force.
	if err := validation.Apply(ctx, db, "users", v, validation.Moderate, validation.Error); err != nil {
		return err
	}
	fmt.Println("Apply: validator in force (validationLevel moderate, validationAction error)")

	_, err = users.InsertOne(ctx, User{Email: "edsger@example.com", Name: "Edsger", CreatedAt: now, Role: "user", Age: 72})
	fmt.Printf("insert a valid user: %v\n", errText(err))
	_, err = users.InsertOne(ctx, User{Email: "barbara@example.com", Name: "Barbara", CreatedAt: now, Age: 200})
	fmt.Printf("insert a user aged 200: %v\n", errText(err))
	if err == nil {
		return errors.New("the validator let an invalid user in")
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return "accepted"
	}
	return "refused: " + err.Error()
}
