package versioning_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TestChainOverMixedCollection: documents of versions 1, 2 and 3 side by
// side; every read returns the v3 shape, and after MigrateAll only v3
// documents remain.
func TestChainOverMixedCollection(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		seed(t, coll,
			v1("ada", "Ada Lovelace", "ada@example.com"),
			v1("grace", "Grace Hopper", "grace@example.com"),
			v2("alan", "Alan Turing", "alan@example.com"),
			v2("edsger", "Edsger Dijkstra", "edsger@example.com"),
			v3("barbara", "Barbara", "Liskov", "barbara@example.com"),
			append(v1("plato", "Plato", "plato@example.com"), bson.E{Key: "schemaVersion", Value: 1.0}), // a double, as the shell writes
		)
		want := map[string]User{
			"ada":     {ID: "ada", First: "Ada", Last: "Lovelace", Email: "ada@example.com", Locale: "en"},
			"grace":   {ID: "grace", First: "Grace", Last: "Hopper", Email: "grace@example.com", Locale: "en"},
			"alan":    {ID: "alan", First: "Alan", Last: "Turing", Email: "alan@example.com", Locale: "en"},
			"edsger":  {ID: "edsger", First: "Edsger", Last: "Dijkstra", Email: "edsger@example.com", Locale: "en"},
			"barbara": {ID: "barbara", First: "Barbara", Last: "Liskov", Email: "barbara@example.com", Locale: "fr"},
			"plato":   {ID: "plato", First: "Plato", Last: "", Email: "plato@example.com", Locale: "en"},
		}

		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, versioning.Stats{Versions: map[int]int64{1: 3, 2: 2, 3: 1}}, s, "documents without the field count as version 1")

		// Read-only repository: every read is v3, nothing is written.
		ro := newUsers(t, db, p, func(c *versioning.Config) { c.NoWriteBack = true })
		for u, err := range ro.Find(ctx, nil, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})) {
			require.NoError(t, err)
			require.Equal(t, want[u.ID], u)
		}
		s, err = r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, map[int]int64{1: 3, 2: 2, 3: 1}, s.Versions, "NoWriteBack reads write nothing")

		// Get migrates lazily and writes back.
		ada, err := r.Get(ctx, "ada")
		require.NoError(t, err)
		require.Equal(t, want["ada"], ada)
		raw := stored(t, coll, "ada")
		require.Equal(t, int32(3), raw.Lookup("schemaVersion").Int32())
		_, err = raw.LookupErr("name")
		require.Error(t, err, "the stored document is v3-shaped")
		require.Equal(t, []string{"_id", "first", "last", "email", "locale", "visits", "schemaVersion", "_rev"}, keys(t, raw), "T's encoding, then the stamps")

		s, err = r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, map[int]int64{1: 2, 2: 2, 3: 2}, s.Versions)

		var progress [][2]int
		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 2, Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: 4}, res)
		require.Equal(t, [][2]int{{2, 4}, {4, 4}}, progress)

		s, err = r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, versioning.Stats{Versions: map[int]int64{3: 6}}, s, "only v3 remains")

		for u, err := range r.Find(ctx, bson.D{}) {
			require.NoError(t, err)
			require.Equal(t, want[u.ID], u)
		}
		res, err = r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{}, res, "a second run finds nothing")
	})
}

func TestRoundTrips(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		seed(t, coll, v1("old", "Ada Lovelace", "ada@example.com"), v3("new", "Barbara", "Liskov", "b@example.com"))
		c := mongotest.NewCounter(t, db)

		got := c.Count(func() {
			_, err := r.Get(ctx, "new")
			require.NoError(t, err)
		})
		require.Equal(t, []string{"find"}, got, "Get of a current document is one command")

		got = c.Count(func() {
			_, err := r.Get(ctx, "old")
			require.NoError(t, err)
		})
		require.Equal(t, []string{"find", "update"}, got, "Get of an old document: find, then the write-back (replaceOne)")

		got = c.Count(func() {
			_, err := r.Get(ctx, "old")
			require.NoError(t, err)
		})
		require.Equal(t, []string{"find"}, got, "once written back, it is current")

		got = c.Count(func() {
			require.NoError(t, r.Update(ctx, "new", bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}}))
		})
		if p.ServerSizeLimit {
			require.Equal(t, []string{"update"}, got, "Update of a current document is one command")
		} else {
			require.Equal(t, []string{"find", "findAndModify"}, got, "Update of a current document reads it and updates it, returning the result to size it")
		}

		got = c.Count(func() {
			_, err := r.Insert(ctx, User{ID: "third", First: "Alan"})
			require.NoError(t, err)
			require.NoError(t, r.Replace(ctx, "third", User{ID: "third", First: "Alan", Last: "Turing"}))
			require.NoError(t, r.Delete(ctx, "third"))
		})
		require.Equal(t, []string{"insert", "update", "delete"}, got)
	})
}

func TestWritesStampTheCurrentVersion(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)

		// T may carry the version field itself: Insert overwrites it.
		type withVersion struct {
			ID      string `bson:"_id"`
			Version int    `bson:"schemaVersion"`
			First   string `bson:"first"`
		}
		rv := newRepo[withVersion](t, db, p, usersConfig())
		id, err := rv.Insert(ctx, withVersion{ID: "a", Version: 1, First: "Ada"})
		require.NoError(t, err)
		require.Equal(t, "a", id)
		raw := stored(t, coll, "a")
		require.Equal(t, []string{"_id", "schemaVersion", "first", "_rev"}, keys(t, raw), "the version field keeps its place")
		require.Equal(t, int32(3), raw.Lookup("schemaVersion").Int32())
		rev1 := raw.Lookup("_rev").ObjectID()

		// Without an _id the driver generates one, and Insert returns it.
		type noID struct {
			ID    bson.ObjectID `bson:"_id,omitempty"`
			First string        `bson:"first"`
		}
		rn := newRepo[noID](t, db, p, usersConfig())
		gen, err := rn.Insert(ctx, noID{First: "Grace"})
		require.NoError(t, err)
		require.IsType(t, bson.ObjectID{}, gen)
		got, err := rn.Get(ctx, gen)
		require.NoError(t, err)
		require.Equal(t, noID{ID: gen.(bson.ObjectID), First: "Grace"}, got)

		require.NoError(t, r.Replace(ctx, "a", User{ID: "a", First: "Ada", Last: "Lovelace"}))
		raw = stored(t, coll, "a")
		require.Equal(t, int32(3), raw.Lookup("schemaVersion").Int32())
		rev2 := raw.Lookup("_rev").ObjectID()
		require.NotEqual(t, rev1, rev2, "every write sets a new revision")

		require.NoError(t, r.Update(ctx, "a", bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "ada@example.com"}}}}))
		raw = stored(t, coll, "a")
		require.Equal(t, int32(3), raw.Lookup("schemaVersion").Int32())
		require.NotEqual(t, rev2, raw.Lookup("_rev").ObjectID())
		u, err := r.Get(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, User{ID: "a", First: "Ada", Last: "Lovelace", Email: "ada@example.com"}, u)
	})
}

// TestUpdateMigratesOldDocumentsFirst: an update is written against the
// current shape, so an old document is migrated before it is updated,
// even by a repository that does not write back on reads.
func TestUpdateMigratesOldDocumentsFirst(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p, func(c *versioning.Config) { c.NoWriteBack = true })
		seed(t, coll, v1("ada", "Ada Lovelace", "ada@example.com"))
		c := mongotest.NewCounter(t, db)

		got := c.Count(func() {
			require.NoError(t, r.Update(ctx, "ada", bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: "King"}}}}))
		})
		if p.ServerSizeLimit {
			require.Equal(t, []string{"update", "find", "update", "update"}, got, "miss, read, write back, update")
		} else {
			require.Equal(t, []string{"find", "update", "findAndModify"}, got, "read, write back, update returning the result")
		}
		u, err := r.Get(ctx, "ada")
		require.NoError(t, err)
		require.Equal(t, User{ID: "ada", First: "Ada", Last: "King", Email: "ada@example.com", Locale: "en"}, u)
		_, err = stored(t, coll, "ada").LookupErr("name")
		require.Error(t, err, "no v1 field survives next to the v3 ones")
	})
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		r, _, coll, before := withAda(t, p)

		for _, id := range []any{nil, "", bson.M{"$ne": nil}, bson.D{{Key: "$gt", Value: ""}}, 0} {
			_, err := r.Get(ctx, id)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorIs(t, r.Update(ctx, id, bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: "x"}}}}), patterns.ErrInvalid)
			require.ErrorIs(t, r.Replace(ctx, id, User{}), patterns.ErrInvalid)
			require.ErrorIs(t, r.Delete(ctx, id), patterns.ErrInvalid)
		}
		for _, update := range []any{
			bson.D{{Key: "$set", Value: bson.D{{Key: "schemaVersion", Value: 1}}}},
			bson.D{{Key: "last", Value: "x"}},
		} {
			require.ErrorIs(t, r.Update(ctx, "a", update), patterns.ErrInvalid)
		}
		err := r.Update(ctx, "a", bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: "x"}}}}, options.UpdateOne().SetUpsert(true))
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorContains(t, err, "upsert")
		for _, err := range r.Find(ctx, nil, options.Find().SetProjection(bson.D{{Key: "first", Value: 1}})) {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, "projection")
		}
		require.Equal(t, before, stored(t, coll, "a"), "nothing was written")

		_, err = r.Get(ctx, "nobody")
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.ErrorIs(t, r.Update(ctx, "nobody", bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: "x"}}}}), patterns.ErrNotFound)
		require.ErrorIs(t, r.Replace(ctx, "nobody", User{ID: "nobody"}), patterns.ErrNotFound)
		require.ErrorIs(t, r.Delete(ctx, "nobody"), patterns.ErrNotFound)
		n, err := coll.CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	})
}

// TestNewerDocumentsAreNeverTouched: old code (this repository, Current 3)
// meets a version 4 document written by a newer release.
func TestNewerDocumentsAreNeverTouched(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		newer := bson.D{{Key: "_id", Value: "n"}, {Key: "schemaVersion", Value: 4}, {Key: "given", Value: "Ada"}}
		seed(t, coll, newer, v3("c", "Barbara", "Liskov", "b@example.com"))
		before := stored(t, coll, "n")

		_, err := r.Get(ctx, "n")
		require.ErrorIs(t, err, versioning.ErrNewerSchema)
		require.EqualError(t, err, `versioning: Get: document "n" of users: stored at version 4, this code knows up to 3: document schema is newer than this code knows`)
		require.ErrorIs(t, r.Replace(ctx, "n", User{ID: "n", First: "x"}), versioning.ErrNewerSchema)
		require.ErrorIs(t, r.Update(ctx, "n", bson.D{{Key: "$set", Value: bson.D{{Key: "first", Value: "x"}}}}), versioning.ErrNewerSchema)

		var ids []string
		var errs []error
		for u, err := range r.Find(ctx, nil, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ids = append(ids, u.ID)
		}
		require.Equal(t, []string{"c"}, ids, "Find goes on past a newer document")
		require.Len(t, errs, 1)
		require.ErrorIs(t, errs[0], versioning.ErrNewerSchema)

		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{}, res)
		require.Equal(t, before, stored(t, coll, "n"), "never downgraded or overwritten")

		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, map[int]int64{3: 1, 4: 1}, s.Versions)
	})
}

// TestFailingMigrationLeavesTheDocumentUntouched: the error names the
// document and the versions, Get returns it wrapped, MigrateAll reports it.
func TestFailingMigrationLeavesTheDocumentUntouched(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		seed(t, coll,
			bson.D{{Key: "_id", Value: "bad"}, {Key: "name", Value: 42}, {Key: "mail", Value: "x@example.com"}},
			bson.D{{Key: "_id", Value: "garbled"}, {Key: "schemaVersion", Value: "two"}},
			bson.D{{Key: "_id", Value: "ancient"}, {Key: "schemaVersion", Value: 0}},
			v1("good", "Ada Lovelace", "ada@example.com"),
		)
		before := map[string]bson.Raw{}
		for _, id := range []string{"bad", "garbled", "ancient"} {
			before[id] = stored(t, coll, id)
		}

		_, err := r.Get(ctx, "bad")
		require.ErrorIs(t, err, versioning.ErrMigration)
		me, ok := errors.AsType[*versioning.MigrationError](err)
		require.True(t, ok)
		require.Equal(t, &versioning.MigrationError{ID: "bad", From: 2, To: 3, Err: me.Err}, me)
		require.EqualError(t, err, `versioning: Get: document "bad" of users: from version 2 to 3: name is int32, not a string: document cannot be migrated`)

		_, err = r.Get(ctx, "garbled")
		require.ErrorIs(t, err, versioning.ErrMigration)
		require.EqualError(t, err, `versioning: Get: document "garbled" of users: field "schemaVersion" is a BSON string, not an integer version: document cannot be migrated`)

		_, err = r.Get(ctx, "ancient")
		require.ErrorIs(t, err, versioning.ErrMigration)
		require.ErrorContains(t, err, "from version 0 to 1: no migration from version 0: the oldest version this code reads is 1")

		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.ErrorIs(t, err, versioning.ErrMigration)
		require.ErrorContains(t, err, "3 documents failed")
		require.Equal(t, 1, res.Migrated)
		var failed []any
		for _, f := range res.Failed {
			require.ErrorIs(t, f.Err, versioning.ErrMigration)
			failed = append(failed, f.ID)
		}
		require.ElementsMatch(t, []any{"bad", "garbled", "ancient"}, failed)
		for id, raw := range before {
			require.Equal(t, raw, stored(t, coll, id), "%s is untouched", id)
		}

		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, versioning.Stats{Versions: map[int]int64{0: 1, 1: 1, 3: 1}, Invalid: 1}, s)

		// MaxFailures stops the run early.
		res, err = r.MigrateAll(ctx, versioning.MigrateOptions{MaxFailures: 1, BatchSize: 1})
		require.ErrorIs(t, err, versioning.ErrMigration)
		require.ErrorContains(t, err, "stopped after 1 failed documents")
		require.Len(t, res.Failed, 1)
	})
}

// TestUpdateRefusesAVersionThatIsAnArray: a version field that holds an
// array is not an integer version, even when the array contains the
// current version (which MongoDB's equality matches). Update refuses the
// document with ErrMigration, as Get does, on every plan, and leaves it
// untouched: an update written against T never lands on it.
func TestUpdateRefusesAVersionThatIsAnArray(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		// Current 1 with no migrations: the missing field is current, and
		// the update's filter also matches null.
		notes := newRepo[User](t, db, p, versioning.Config{Collection: "notes", Current: 1})
		arr := func(id string, vs ...any) bson.D {
			return append(v1(id, "Ada Lovelace", "ada@example.com"), bson.E{Key: "schemaVersion", Value: bson.A(vs)})
		}
		seed(t, coll, arr("holds3", 1, 3), arr("only3", 3))
		seed(t, db.Collection("notes"), arr("holds1", 1), arr("holdsNull", nil, 2))
		for _, c := range []struct {
			repo *versioning.Repo[User]
			coll *mongo.Collection
			id   string
		}{{r, coll, "holds3"}, {r, coll, "only3"}, {notes, db.Collection("notes"), "holds1"}, {notes, db.Collection("notes"), "holdsNull"}} {
			before := stored(t, c.coll, c.id)
			_, err := c.repo.Get(ctx, c.id)
			require.ErrorIs(t, err, versioning.ErrMigration, c.id)
			err = c.repo.Update(ctx, c.id, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "new@example.com"}}}})
			require.ErrorIs(t, err, versioning.ErrMigration, c.id)
			require.ErrorContains(t, err, `field "schemaVersion" is a BSON array, not an integer version`, c.id)
			require.Equal(t, before, stored(t, c.coll, c.id), "%s is untouched", c.id)
		}
	})
}

// TestMigratedDocumentMustFitT: a migration that produces a shape T cannot
// decode, or that changes _id, is a failure, and nothing is stored.
func TestMigratedDocumentMustFitT(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		seed(t, coll, v1("a", "Ada Lovelace", "ada@example.com"))
		before := stored(t, coll, "a")
		for name, up := range map[string]func(*versioning.Doc) error{
			"wrong type": func(d *versioning.Doc) error { d.Set("first", bson.A{1}); return nil },
			"changes _id": func(d *versioning.Doc) error {
				d.Set("_id", "b")
				return nil
			},
			"drops _id": func(d *versioning.Doc) error { d.Delete("_id"); return nil },
		} {
			t.Run(name, func(t *testing.T) {
				r := newUsers(t, db, p, func(c *versioning.Config) { c.Migrations[1].Up = up })
				_, err := r.Get(ctx, "a")
				me, ok := errors.AsType[*versioning.MigrationError](err)
				require.True(t, ok, "%v", err)
				require.Equal(t, 1, me.From)
				require.Equal(t, 3, me.To)
				require.Equal(t, before, stored(t, coll, "a"))
			})
		}
	})
}

// TestPipelineUpdate runs a pipeline where the plan has pipeline updates;
// elsewhere Update refuses it naming the feature, sending nothing.
func TestPipelineUpdate(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		// The document holds visits: on MongoDB, $add of a missing field gives
		// null, not the other operand.
		seed(t, coll, append(v3("a", "Ada", "Lovelace", "ada@example.com"), bson.E{Key: "visits", Value: 3}))
		pipeline := mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "visits", Value: bson.D{{Key: "$add", Value: bson.A{"$visits", 2}}}}}}}}
		c := mongotest.NewCounter(t, db)
		if !p.PipelineUpdates {
			err := r.Update(ctx, "a", pipeline)
			require.ErrorIs(t, err, patterns.ErrUnsupported)
			var ue *patterns.UnsupportedError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, patterns.FeaturePipelineUpdates, ue.Feature)
			require.Empty(t, c.Commands(), "refused before anything is sent")
			require.Equal(t, int32(3), stored(t, coll, "a").Lookup("visits").Int32())
			return
		}
		require.NoError(t, r.Update(ctx, "a", pipeline))
		u, err := r.Get(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, 5, u.Visits)
		require.Equal(t, int32(3), stored(t, coll, "a").Lookup("schemaVersion").Int32())
	})
}

// TestUpdateWithArrayFilters: arrayFilters pass through where the plan
// has them; elsewhere Update refuses them naming the feature, sending
// nothing (FerretDB 1.x would answer NotImplemented).
func TestUpdateWithArrayFilters(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		seed(t, coll, append(v3("a", "Ada", "Lovelace", "ada@example.com"), bson.E{Key: "tags", Value: bson.A{"x", "y", "x"}}))
		before := stored(t, coll, "a")
		c := mongotest.NewCounter(t, db)
		update := bson.D{{Key: "$set", Value: bson.D{{Key: "tags.$[t]", Value: "z"}}}}
		err := r.Update(ctx, "a", update, options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "t", Value: "x"}}}))
		if !p.ArrayFilters {
			require.ErrorIs(t, err, patterns.ErrUnsupported)
			var ue *patterns.UnsupportedError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, patterns.FeatureArrayFilters, ue.Feature)
			require.EqualError(t, err, `versioning: Update: document "a" of users: unsupported by the server: the server lacks arrayFilters`)
			require.Empty(t, c.Commands(), "refused before anything is sent")
			require.Equal(t, before, stored(t, coll, "a"))
			return
		}
		require.NoError(t, err)
		after := stored(t, coll, "a")
		require.Equal(t, `["z","y","z"]`, after.Lookup("tags").String())
		require.Equal(t, int32(3), after.Lookup("schemaVersion").Int32())
	})
}

func TestImplicitCurrentVersion(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		// A collection adopting versioning today: what is stored is v1 and
		// current, with no field.
		type Note struct {
			ID   string `bson:"_id"`
			Text string `bson:"text"`
		}
		r := newRepo[Note](t, db, p, versioning.Config{Collection: "notes", Current: 1})
		coll := db.Collection("notes")
		seed(t, coll, bson.D{{Key: "_id", Value: "n"}, {Key: "text", Value: "hi"}})
		c := mongotest.NewCounter(t, db)
		got := c.Count(func() {
			n, err := r.Get(ctx, "n")
			require.NoError(t, err)
			require.Equal(t, Note{ID: "n", Text: "hi"}, n)
			require.NoError(t, r.Update(ctx, "n", bson.D{{Key: "$set", Value: bson.D{{Key: "text", Value: "hello"}}}}))
		})
		want := []string{"find", "update"}
		if !p.ServerSizeLimit {
			want = []string{"find", "find", "findAndModify"}
		}
		require.Equal(t, want, got, "no write-back, and the update matches the unstamped document")
		updated := stored(t, coll, "n")
		require.Equal(t, int32(1), updated.Lookup("schemaVersion").Int32())

		seed(t, coll, bson.D{{Key: "_id", Value: "m"}, {Key: "text", Value: "unstamped"}})
		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{}, res, "documents without the field are current: nothing to migrate")
		require.Equal(t, updated, stored(t, coll, "n"))
	})
}

// TestFindWritesBackAsItGoes: Find over old documents yields them as T and
// stores each migrated one, before it reads the next page.
func TestFindWritesBackAsItGoes(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		r := newUsers(t, db, p)
		seed(t, coll,
			v1("a", "Ada Lovelace", "ada@example.com"),
			v3("b", "Barbara", "Liskov", "b@example.com"),
			v2("c", "Alan Turing", "alan@example.com"),
		)
		c := mongotest.NewCounter(t, db)
		var ids []string
		got := c.Count(func() {
			for u, err := range r.Find(ctx, nil, options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "_id", Value: 1}})) {
				require.NoError(t, err)
				require.NotEmpty(t, u.First)
				ids = append(ids, u.ID)
			}
		})
		require.Equal(t, []string{"a", "b", "c"}, ids)
		require.Equal(t, []string{"find", "update", "find", "update", "find"}, got, "one write-back per old document, a find per page of two, one of the greatest _id")
		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, map[int]int64{3: 3}, s.Versions)
	})
}
