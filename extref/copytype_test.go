package extref

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

type customerRef struct {
	ID    bson.ObjectID `bson:"id"`
	Name  string        `bson:"name"`
	Email string        `bson:"email,omitempty"`
}

type Audit struct {
	Tier string `bson:"tier"`
}

type withInline struct {
	ID    int `bson:"id"`
	Name  string
	Audit `bson:",inline"`
	//lint:ignore U1000 an unexported field, which the copy type must leave out
	private int
	Skipped string `bson:"-"`
}

type withMap struct {
	ID    int            `bson:"id"`
	Extra map[string]any `bson:",inline"`
}

type duplicate struct {
	ID    int    `bson:"id"`
	Name  string `bson:"name"`
	Other string `bson:"name"`
}

type marshals struct {
	ID int `bson:"id"`
}

func (marshals) MarshalBSON() ([]byte, error) { return bson.Marshal(bson.D{}) }

func TestDescribe(t *testing.T) {
	ct, err := describe[customerRef]("id")
	require.NoError(t, err)
	require.Equal(t, copyType{name: "extref.customerRef", id: "id", fields: []string{"name", "email"}}, ct)

	ct, err = describe[withInline]("id")
	require.NoError(t, err)
	require.Equal(t, []string{"name", "tier"}, ct.fields, "lowercased names, inline structs flattened, '-' and unexported skipped")

	ct, err = describe[customerRef]("name")
	require.NoError(t, err)
	require.Equal(t, []string{"id", "email"}, ct.fields, "the id field can be any field of S")
}

func TestDescribeRejects(t *testing.T) {
	tests := []struct {
		name string
		fn   func(idField string) (copyType, error)
		id   string
		says string
	}{
		{"not a struct", describe[string], "not a struct", ""},
		{"pointer", describe[*customerRef], "not a struct", ""},
		{"no id field", describe[customerRef], `no field "_id"`, "_id"},
		{"only an id", describe[struct {
			ID int `bson:"id"`
		}], "no copied fields", ""},
		{"inline map", describe[withMap], "inline map", ""},
		{"duplicate", describe[duplicate], "appears twice", ""},
		{"own encoding", describe[marshals], "implements", ""},
		{"dotted field", describe[struct {
			ID int    `bson:"id"`
			A  string `bson:"a.b"`
		}], "path", ""},
		{"operator field", describe[struct {
			ID int    `bson:"id"`
			A  string `bson:"$a"`
		}], "operator", ""},
		{"cannot encode", describe[struct {
			ID int `bson:"id"`
			C  chan int
		}], "cannot be encoded", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.id == "" {
				tc.id = "id"
			}
			_, err := tc.fn(tc.id)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.Contains(t, err.Error(), tc.says)
		})
	}
}
