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
