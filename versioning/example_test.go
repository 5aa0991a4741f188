package versioning_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// User is the current shape, version 3.
type User struct {
	ID     string `bson:"_id"`
	First  string `bson:"first"`
	Last   string `bson:"last"`
	Email  string `bson:"email"`
	Locale string `bson:"locale"`
}

// The chain: v1 {name, mail} → v2 renames mail to email → v3 splits name
// into first and last and adds locale, defaulting to "en".
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

func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_versioning")
	defer db.Drop(ctx)

	// Documents written by earlier releases: v1 without a version field,
	// v2 with one.
	_, err = db.Collection("users").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "ada"}, {Key: "name", Value: "Ada Lovelace"}, {Key: "mail", Value: "ada@example.com"}},
		bson.D{{Key: "_id", Value: "alan"}, {Key: "schemaVersion", Value: 2}, {Key: "name", Value: "Alan Turing"}, {Key: "email", Value: "alan@example.com"}},
		bson.D{{Key: "_id", Value: "grace"}, {Key: "name", Value: "Grace Hopper"}, {Key: "mail", Value: "grace@example.com"}},
	})
	if err != nil {
		panic(err)
	}

	users, err := versioning.New[User](db, versioning.Config{Collection: "users", Current: 3, Migrations: migrations})
	if err != nil {
		panic(err)
	}
	if err := patterns.EnsureIndexes(ctx, users.Indexes()...); err != nil {
		panic(err)
	}

	// Reads return the current shape; Get writes the migrated document back.
	ada, err := users.Get(ctx, "ada")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", ada)
	stats, err := users.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("versions:", stats.Versions)

	// Migrate the rest eagerly.
	res, err := users.MigrateAll(ctx, versioning.MigrateOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("migrated:", res.Migrated)
	stats, err = users.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("versions:", stats.Versions)
	// Output:
	// {ID:ada First:Ada Last:Lovelace Email:ada@example.com Locale:en}
	// versions: map[1:1 2:1 3:1]
	// migrated: 2
	// versions: map[3:3]
}
