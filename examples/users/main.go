// Command users shows schema versioning on a users collection that three
// releases have written: release 1 stored {name, mail} without a version,
// release 2 renamed mail to email, and release 3 (this program) splits
// name into first and last and adds a locale. Reads migrate old documents
// lazily, writes stamp version 3, a document from a newer release is
// refused rather than downgraded, and MigrateAll finishes the rest.
//
//	go -C examples run ./users
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// User is the shape of release 3.
type User struct {
	ID     string `bson:"_id"`
	First  string `bson:"first"`
	Last   string `bson:"last"`
	Email  string `bson:"email"`
	Locale string `bson:"locale"`
	Logins int    `bson:"logins"`
}

// migrations turn the documents of releases 1 and 2 into release 3's.
var migrations = []versioning.Migration{
	{From: 1, Up: func(d *versioning.Doc) error {
		d.Rename("mail", "email")
		return nil
	}},
	{From: 2, Up: func(d *versioning.Doc) error {
		name, _ := d.Get("name")
		s, ok := name.(string)
		if !ok {
			return fmt.Errorf("name is %T, not a string", name)
		}
		first, last, _ := strings.Cut(s, " ")
		d.Delete("name")
		d.Set("first", first)
		d.Set("last", last)
		d.Set("locale", "en")
		return nil
	}},
}

func main() { demo.Run("example_users", run) }

func run(ctx context.Context, db *mongo.Database) error {

	// What earlier releases left behind, and one document from release 4,
	// already deployed on some servers.
	legacy := []any{
		bson.D{{Key: "_id", Value: "ada"}, {Key: "name", Value: "Ada Lovelace"}, {Key: "mail", Value: "ada@example.com"}},
		bson.D{{Key: "_id", Value: "grace"}, {Key: "name", Value: "Grace Hopper"}, {Key: "mail", Value: "grace@example.com"}},
		bson.D{{Key: "_id", Value: "alan"}, {Key: "schemaVersion", Value: 2}, {Key: "name", Value: "Alan Turing"}, {Key: "email", Value: "alan@example.com"}},
		bson.D{{Key: "_id", Value: "edsger"}, {Key: "name", Value: "Edsger Dijkstra"}, {Key: "mail", Value: "edsger@example.com"}},
		bson.D{{Key: "_id", Value: "linus"}, {Key: "schemaVersion", Value: 4}, {Key: "given", Value: "Linus"}},
	}
	if _, err := db.Collection("users").InsertMany(ctx, legacy); err != nil {
		return err
	}

	users, err := versioning.New[User](db, versioning.Config{Collection: "users", Current: 3, Migrations: migrations})
	if err != nil {
		return err
	}
	if err := patterns.EnsureIndexes(ctx, users.Indexes()...); err != nil {
		return err
	}
	if err := printStats(ctx, users, "at start"); err != nil {
		return err
	}

	ada, err := users.Get(ctx, "ada")
	if err != nil {
		return err
	}
	fmt.Printf("Get ada (v1, migrated and written back): %+v\n", ada)

	if err := users.Update(ctx, "grace", bson.D{{Key: "$inc", Value: bson.D{{Key: "logins", Value: 1}}}}); err != nil {
		return err
	}
	grace, err := users.Get(ctx, "grace")
	if err != nil {
		return err
	}
	fmt.Printf("Update grace (v1, migrated first, then updated): %+v\n", grace)

	if _, err := users.Get(ctx, "linus"); errors.Is(err, versioning.ErrNewerSchema) {
		fmt.Println("Get linus:", err)
	} else {
		return fmt.Errorf("get linus: want ErrNewerSchema, got %v", err)
	}

	res, err := users.MigrateAll(ctx, versioning.MigrateOptions{Progress: func(done, total int) {
		fmt.Printf("MigrateAll progress: %d/%d\n", done, total)
	}})
	if err != nil {
		return err
	}
	fmt.Printf("MigrateAll: %d migrated, %d skipped, %d failed\n", res.Migrated, res.Skipped, len(res.Failed))
	if err := printStats(ctx, users, "at the end"); err != nil {
		return err
	}
	return nil
}

func printStats(ctx context.Context, users *versioning.Repo[User], when string) error {
	s, err := users.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("documents per version %s: %v\n", when, s.Versions)
	return nil
}
