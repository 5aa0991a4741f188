package doctor_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/doctor"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// memberV1 is the type a collection's validator was generated from;
// memberV2 is the code today: age became required, phone was added, the
// email pattern changed and nick was dropped.
type memberV1 struct {
	Email string `bson:"email"`
	Age   int32  `bson:"age,omitempty"`
	Nick  string `bson:"nick"`
}

type memberV2 struct {
	Email string `bson:"email"`
	Age   int32  `bson:"age"`
	Phone string `bson:"phone"`
}

func forType[T any](t *testing.T, pattern string) *validation.Validator {
	t.Helper()
	v, err := validation.For[T](validation.Field("email", validation.Pattern(pattern)))
	require.NoError(t, err)
	return v
}

// TestValidatorRules: validator-drift names every field whose validator
// differs from the type's, and nothing for a collection that matches;
// missing-validator reports each collection without one; both only read.
func TestValidatorRules(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	for _, name := range []string{"drifted", "same", "plain"} {
		_, err := db.Collection(name).InsertOne(ctx, bson.D{{Key: "email", Value: "a@b"}, {Key: "age", Value: int32(3)}, {Key: "phone", Value: "1"}})
		require.NoError(t, err)
	}
	types := map[string]*validation.Validator{
		"drifted": forType[memberV2](t, "^.+@.+$"),
		"same":    forType[memberV2](t, "@"),
		"absent":  forType[memberV2](t, "@"),
	}
	opts := doctor.Options{Validators: &doctor.ValidatorCheck{Types: types}}
	if !mongotest.Server().Has(patterns.FeatureValidators) {
		rep, err := doctor.Check(ctx, db, opts)
		require.NoError(t, err)
		for _, rule := range []string{doctor.RuleValidatorDrift, doctor.RuleMissingValidator} {
			require.True(t, slices.ContainsFunc(rep.Skipped, func(s doctor.Skip) bool { return s.Rule == rule }), "%s skipped: %v", rule, rep.Skipped)
			require.Empty(t, has(rep, rule, "plain"))
		}
		mongotest.Require(t, patterns.FeatureValidators) // and say what did not run
	}
	require.NoError(t, validation.Apply(ctx, db, "drifted", forType[memberV1](t, "@"), "", ""))
	require.NoError(t, validation.Apply(ctx, db, "same", types["same"], "", ""))

	counter := mongotest.NewCounter(t, db)
	rep, err := doctor.Check(ctx, db, opts)
	require.NoError(t, err)
	for _, c := range counter.Commands() {
		require.Contains(t, readCommands, c, "a check only reads")
	}
	var drifted []string
	for _, f := range has(rep, doctor.RuleValidatorDrift, "drifted") {
		mongotest.Detail(t, "%s: %s", f.Field, f.Message)
		drifted = append(drifted, f.Field)
	}
	if portableForm(t, db, "drifted") {
		// The portable form names a field the type adds or drops once:
		// its required condition beside the $jsonSchema is not a second
		// finding (TestValidatorDriftOfThePortableFormNamesAFieldOnce).
		require.ElementsMatch(t, []string{"email", "age", "nick", "phone"}, drifted,
			"pattern of email; age required; nick dropped; phone added")
	} else {
		require.ElementsMatch(t, []string{"email", "age", "nick", "nick", "phone", "phone"}, drifted,
			"pattern of email; age required; nick dropped (field and required); phone added (field and required)")
	}
	require.Empty(t, has(rep, doctor.RuleValidatorDrift, "same"))
	absent := has(rep, doctor.RuleValidatorDrift, "absent")
	require.Len(t, absent, 1)
	require.Contains(t, absent[0].Message, "does not exist")

	missing := has(rep, doctor.RuleMissingValidator, "plain")
	require.Len(t, missing, 1)
	require.Equal(t, doctor.Info, missing[0].Severity)
	require.Empty(t, has(rep, doctor.RuleMissingValidator, "same"))
	require.Empty(t, has(rep, doctor.RuleMissingValidator, "drifted"))

	// Without Options.Validators, neither rule runs.
	rep, err = doctor.Check(ctx, db, doctor.Options{})
	require.NoError(t, err)
	require.Empty(t, has(rep, doctor.RuleMissingValidator, "plain"))
}

// TestValidatorTurnedOff: a validator under validationLevel "off" checks
// nothing, so the collection is reported as one without a validator
// (missing-validator), and as drifted from its type (validator-drift), even
// when the validator itself is the type's; before, the doctor said nothing.
func TestValidatorTurnedOff(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	v := forType[memberV2](t, "@")
	for _, name := range []string{"off", "on"} {
		require.NoError(t, validation.Apply(ctx, db, name, v, "", ""))
	}
	require.NoError(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "off"}, {Key: "validationLevel", Value: "off"}}).Err())
	_, err := db.Collection("off").InsertOne(ctx, bson.D{{Key: "email", Value: 42}})
	require.NoError(t, err, "the server enforces nothing under validationLevel off")

	rep, err := doctor.Check(ctx, db, doctor.Options{Validators: &doctor.ValidatorCheck{Types: map[string]*validation.Validator{"off": v, "on": v}}})
	require.NoError(t, err)
	missing := has(rep, doctor.RuleMissingValidator, "off")
	require.Len(t, missing, 1)
	require.Contains(t, missing[0].Message, `validationLevel "off"`)
	drift := has(rep, doctor.RuleValidatorDrift, "off")
	require.Len(t, drift, 1)
	require.Contains(t, drift[0].Message, `validationLevel "off"`)
	require.Empty(t, has(rep, doctor.RuleMissingValidator, "on"))
	require.Empty(t, has(rep, doctor.RuleValidatorDrift, "on"))
}

// TestValidatorWarnOnly: a validator under validationAction "warn" lets
// every write through (the server only logs it): missing-validator says
// so, as info; under "error" it says nothing.
func TestValidatorWarnOnly(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	v := forType[memberV2](t, "@")
	require.NoError(t, validation.Apply(ctx, db, "warned", v, "", validation.Warn))
	require.NoError(t, validation.Apply(ctx, db, "enforced", v, "", validation.Error))
	rep, err := doctor.Check(ctx, db, doctor.Options{Validators: &doctor.ValidatorCheck{}})
	require.NoError(t, err)
	warned := has(rep, doctor.RuleMissingValidator, "warned")
	require.Len(t, warned, 1)
	require.Equal(t, doctor.Info, warned[0].Severity)
	require.Contains(t, warned[0].Message, `validationAction "warn"`)
	require.Empty(t, has(rep, doctor.RuleMissingValidator, "enforced"))
}

// portableForm reports whether validation.Apply stored the portable form of
// a validator on the collection ($jsonSchema and conditions beside it under $and), as it
// does on a server whose $jsonSchema lacks what the library needs.
func portableForm(t *testing.T, db *mongo.Database, name string) bool {
	t.Helper()
	specs, err := db.ListCollectionSpecifications(context.Background(), bson.D{{Key: "name", Value: name}})
	require.NoError(t, err)
	require.Len(t, specs, 1)
	validator, ok := specs[0].Options.Lookup("validator").DocumentOK()
	require.True(t, ok, "a validator on %s: %s", name, specs[0].Options)
	_, err = validator.LookupErr("$jsonSchema")
	return err != nil // the portable form is {$and: [{$jsonSchema: ...}, {$nor: [...]}]}
}
