package validation_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// The commands of every plan, pinned: MongoDB takes the whole
// $jsonSchema at create; FerretDB 2 creates plainly and sets the
// portable form by collMod; FerretDB 1 gets nothing.
func TestCommands(t *testing.T) {
	v := users(t, validation.OnlyConstrained())
	portable, err := v.Portable()
	require.NoError(t, err)
	settings := func(validator bson.D) bson.D {
		return bson.D{{Key: "validator", Value: validator}, {Key: "validationLevel", Value: "strict"}, {Key: "validationAction", Value: "error"}}
	}
	for name, srv := range mongotest.KnownServers() {
		p := validation.PlanFor(srv)
		sent, err := validation.SendForm(p, v, name)
		if !p.Validators {
			require.ErrorIs(t, err, patterns.ErrUnsupported, name)
			continue
		}
		require.NoError(t, err)
		want := portable
		if p.FullSchema {
			want = v.Document()
		}
		requireSameBSON(t, want, sent)
		requireSameBSON(t, bson.D{{Key: "$nor", Value: bson.A{want}}}, validation.RejectsFilter(sent))
		create := bson.D{{Key: "create", Value: "users"}}
		if p.CreateWithValidator {
			create = append(create, settings(want)...)
		}
		requireSameBSON(t, create, validation.CreateCommand(p, "users", sent, validation.Strict, validation.Error))
		requireSameBSON(t, append(bson.D{{Key: "collMod", Value: "users"}}, settings(want)...),
			validation.CollModCommand("users", sent, validation.Strict, validation.Error))
	}
}

// A map whose values have a type has no portable form: refused, never
// dropped, on a server with only the core keywords.
func TestPortableRefusesWhatItCannotSay(t *testing.T) {
	v, err := validation.For[RichMap]()
	require.NoError(t, err)
	_, err = v.Portable()
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	require.ErrorContains(t, err, "additionalProperties")
	require.ErrorContains(t, err, string(patterns.FeatureJSONSchema))
	_, err = validation.SendForm(validation.PlanFor(mongotest.KnownServers()["FerretDB 2.7"]), v, "FerretDB 2.7")
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	// MongoDB's form has it.
	labels := v.Schema()
	require.Contains(t, bson.Raw(mustMarshal(t, labels)).String(), `"labels": {"bsonType": ["object","null"],"additionalProperties": {"bsonType": "int"}}`)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	require.NoError(t, err)
	return b
}
