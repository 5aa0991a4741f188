package validation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

var when = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func user(id, email string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "email", Value: email}, {Key: "name", Value: "Ada"}, {Key: "created_at", Value: when}}
}

func with(d bson.D, k string, v any) bson.D {
	out := bson.D{}
	for _, e := range d {
		if e.Key != k {
			out = append(out, e)
		}
	}
	if v != nil {
		out = append(out, bson.E{Key: k, Value: v})
	}
	return out
}

// invalidUsers are one document for each way to break the users
// validator, by _id, with the field Check must name.
func invalidUsers() (docs []any, fields map[string]string) {
	ada := user("x", "ada@example.com")
	bad := []struct {
		id, field string
		doc       bson.D
	}{
		{"missing-email", "email", with(ada, "email", nil)},
		{"missing-created", "created_at", with(ada, "created_at", nil)},
		{"email-not-string", "email", with(ada, "email", 42)},
		{"email-pattern", "email", with(ada, "email", "ada@example")},
		{"role-enum", "role", with(ada, "role", "root")},
		{"age-negative", "age", with(ada, "age", int32(-1))},
		{"age-too-old", "age", with(ada, "age", int32(151))},
		{"age-long", "age", with(ada, "age", int64(30))},
	}
	fields = map[string]string{}
	for _, b := range bad {
		docs = append(docs, with(b.doc, "_id", b.id))
		fields[b.id] = b.field
	}
	return docs, fields
}

func validUsers() []any {
	return []any{
		user("ada", "ada@example.com"),
		with(with(user("bob", "bob.smith+x@mail.example.org"), "role", "admin"), "age", int32(150)),
		with(with(user("cy", "cy@ex.io"), "role", "moderator"), "age", int32(0)),
	}
}

// TestEnforced applies the users validator to a collection holding
// valid and invalid documents: Check counts exactly the invalid ones and
// names each one's failing field; after Apply, valid documents are
// accepted and each kind of invalid one is refused.
func TestEnforced(t *testing.T) {
	mongotest.RunPlans(t, validation.PlanFor, func(t *testing.T, p validation.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		coll := db.Collection("users")
		v := users(t, validation.OnlyConstrained()) // the design documents' validator
		if !p.Validators {
			_, err := validation.CheckPlan(ctx, coll, v, p)
			require.ErrorIs(t, err, patterns.ErrUnsupported)
			err = validation.ApplyPlan(ctx, db, "users", v, "", "", p)
			require.ErrorIs(t, err, patterns.ErrUnsupported)
			require.ErrorContains(t, err, string(patterns.FeatureValidators))
			names, err := db.ListCollectionNames(ctx, bson.D{})
			require.NoError(t, err)
			require.Empty(t, names, "nothing created")
			return
		}
		bad, fields := invalidUsers()
		_, err := coll.InsertMany(ctx, append(validUsers(), bad...))
		require.NoError(t, err)

		counter := mongotest.NewCounter(t, db)
		var rep validation.Report
		sent := counter.Count(func() { rep, err = validation.CheckPlan(ctx, coll, v, p) })
		require.NoError(t, err)
		require.Equal(t, []string{"aggregate", "find"}, sent, "count, then sample")
		require.EqualValues(t, len(bad), rep.Rejected)
		require.Len(t, rep.Sample, len(bad))
		for _, r := range rep.Sample {
			id := r.ID.StringValue()
			require.Equal(t, fields[id], r.Field, "%s: %s", id, r.Reason)
		}

		sent = counter.Count(func() { err = validation.ApplyPlan(ctx, db, "users", v, validation.Strict, validation.Error, p) })
		require.NoError(t, err)
		require.Equal(t, []string{"listCollections", "collMod", "listCollections"}, sent, "an existing collection")
		for _, d := range []bson.D{
			user("dee", "dee@example.com"),
			with(with(user("eve", "eve@example.com"), "role", "user"), "age", int32(44)),
		} {
			_, err := coll.InsertOne(ctx, d)
			require.NoError(t, err, "valid %v", d)
		}
		for _, d := range bad {
			d := with(d.(bson.D), "_id", "new-"+d.(bson.D)[len(d.(bson.D))-1].Value.(string))
			_, err := coll.InsertOne(ctx, d)
			requireRejected(t, err, d)
		}
		// An update that breaks a valid document is refused too.
		_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "ada"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "age", Value: int32(200)}}}})
		requireRejected(t, err, "age 200")

		rep, err = validation.CheckPlan(ctx, coll, v, p)
		require.NoError(t, err)
		require.EqualValues(t, len(bad), rep.Rejected, "the documents stored before Apply")
		_, err = coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids(bad)}}}})
		require.NoError(t, err)
		sent = counter.Count(func() { rep, err = validation.CheckPlan(ctx, coll, v, p) })
		require.NoError(t, err)
		require.Equal(t, validation.Report{}, rep)
		require.Equal(t, []string{"aggregate"}, sent, "nothing to sample")

		// A collection that does not exist is created with it.
		sent = counter.Count(func() { err = validation.ApplyPlan(ctx, db, "fresh", v, validation.Moderate, validation.Error, p) })
		require.NoError(t, err)
		if p.CreateWithValidator {
			require.Equal(t, []string{"listCollections", "create", "listCollections"}, sent, "a new collection")
		} else {
			require.Equal(t, []string{"listCollections", "create", "collMod", "listCollections"}, sent, "a new collection, validator by collMod")
		}
		_, err = db.Collection("fresh").InsertOne(ctx, with(user("a", "a@b.cd"), "role", "root"))
		requireRejected(t, err, "role root in a new collection")
		// Applying again changes nothing and succeeds.
		require.NoError(t, validation.ApplyPlan(ctx, db, "fresh", v, validation.Moderate, validation.Error, p))
	})
}

func ids(docs []any) bson.A {
	out := bson.A{}
	for _, d := range docs {
		out = append(out, d.(bson.D)[len(d.(bson.D))-1].Value)
	}
	return out
}

func requireRejected(t *testing.T, err error, what any) {
	t.Helper()
	require.Error(t, err, "invalid %v", what)
	require.True(t, srverr.Refused(err), "%v: %v", what, err)
	var we mongo.WriteException
	require.True(t, errors.As(err, &we), "%v: %v", what, err)
	require.Contains(t, we.Error(), "failed validation")
}

// On a server that ignores a validator given at create, a plan that
// sends it there is caught by the read-back.
func TestApplyReadsBack(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	srv := mongotest.Server()
	if srv.Has(patterns.FeatureJSONSchema) {
		t.Skip("skipped: MongoDB keeps a validator given at create; the read-back is checked on FerretDB 2")
	}
	db := mongotest.DB(t)
	p := validation.PlanFor(srv)
	p.CreateWithValidator = true // as if the server kept it at create
	err := validation.ApplyPlan(context.Background(), db, "users", users(t), "", "", p)
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	require.ErrorContains(t, err, "not the one sent")
}
