package doctor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/validation"
)

type driftV1 struct {
	Email string `bson:"email"`
	Age   int32  `bson:"age,omitempty"`
	Nick  string `bson:"nick"`
}

type driftV2 struct {
	Email string `bson:"email"`
	Age   int32  `bson:"age"`
	Phone string `bson:"phone"`
}

// MongoDB's form (required inside $jsonSchema) is compared as pinned
// here; the portable form by TestValidatorRules on FerretDB 2.
func TestValidatorDriftOfMongoDBForm(t *testing.T) {
	v1, err := validation.For[driftV1](validation.Field("email", validation.Pattern("@")))
	require.NoError(t, err)
	v2, err := validation.For[driftV2](validation.Field("email", validation.Pattern("^.+@.+$")))
	require.NoError(t, err)
	stored, err := bson.Marshal(v1.Document())
	require.NoError(t, err)
	var fields []string
	for _, f := range validatorDrift("members", true, stored, v2) {
		t.Logf("%s: %s", f.Field, f.Message)
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"email", "age", "nick", "nick", "phone", "phone"}, fields)

	same, err := bson.Marshal(v2.Document())
	require.NoError(t, err)
	require.Empty(t, validatorDrift("members", true, same, v2))
	require.Len(t, validatorDrift("members", true, nil, v2), 1, "no validator")
}

// optionalV1 and optionalV2 have every root field optional: their
// validators have no root required in either form. v2 renamed the
// role's enum.
type optionalV1 struct {
	ID   string  `bson:"_id,omitempty"`
	Role string  `bson:"role,omitempty"`
	Nick *string `bson:"nick,omitempty"`
}

type optionalV2 struct {
	ID   string  `bson:"_id,omitempty"`
	Role string  `bson:"role,omitempty"`
	Nick *string `bson:"nick,omitempty"`
}

// With every root field optional, the stored validator's form is told by
// its differences, not by a root required: each form, stored, is
// compared with the same form and gives the one real finding.
func TestValidatorDriftWithEveryFieldOptional(t *testing.T) {
	v1, err := validation.For[optionalV1](validation.Field("role", validation.Enum("user", "admin")))
	require.NoError(t, err)
	v2, err := validation.For[optionalV2](validation.Field("role", validation.Enum("user", "root")))
	require.NoError(t, err)
	portable, err := v1.Portable()
	require.NoError(t, err)
	for name, form := range map[string]bson.D{"MongoDB's": v1.Document(), "portable": portable} {
		stored, err := bson.Marshal(form)
		require.NoError(t, err)
		var fields []string
		for _, f := range validatorDrift("members", true, stored, v2) {
			t.Logf("%s: %s: %s", name, f.Field, f.Message)
			fields = append(fields, f.Field)
		}
		require.Equal(t, []string{"role"}, fields, name)
	}
}

// In the portable form a field the type adds (or drops) is named once: its
// required condition beside the $jsonSchema differs with it and is not a
// second finding (issue 35: "query operators: the validator has none, the
// type gives required" beside the field's own line).
func TestValidatorDriftOfThePortableFormNamesAFieldOnce(t *testing.T) {
	v1, err := validation.For[driftV1]()
	require.NoError(t, err)
	v2, err := validation.For[driftV2]()
	require.NoError(t, err)
	portable, err := v1.Portable()
	require.NoError(t, err)
	stored, err := bson.Marshal(portable)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, f := range validatorDrift("members", true, stored, v2) {
		seen[f.Field]++
		require.NotContains(t, f.Message, "query operators", f.Field)
	}
	require.Equal(t, 1, seen["phone"], "%v", seen)
	require.Equal(t, 1, seen["nick"], "%v", seen)
}
