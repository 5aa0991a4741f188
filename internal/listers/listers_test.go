package listers_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMerged(t *testing.T) {
	o, err := listers.Merged([]options.Lister[options.FindOneAndUpdateOptions]{
		options.FindOneAndUpdate().SetArrayFilters([]any{bson.D{{Key: "e", Value: 1}}}).SetProjection(bson.D{{Key: "a", Value: 1}}),
		nil,
		(*options.FindOneAndUpdateOptionsBuilder)(nil),
		options.FindOneAndUpdate().SetProjection(nil),
	})
	require.NoError(t, err)
	require.Equal(t, []any{bson.D{{Key: "e", Value: 1}}}, o.ArrayFilters)
	require.Nil(t, o.Projection, "the last lister to set a field wins")

	o, err = listers.Merged[options.FindOneAndUpdateOptions](nil)
	require.NoError(t, err)
	require.Nil(t, o.ArrayFilters)
}

type failing struct{}

func (failing) List() []func(*options.FindOptions) error {
	return []func(*options.FindOptions) error{func(*options.FindOptions) error { return errors.New("bad option") }}
}

func TestMergedRefusesAFailingOption(t *testing.T) {
	_, err := listers.Merged([]options.Lister[options.FindOptions]{failing{}})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.EqualError(t, err, "options: bad option: invalid")
}

// Only the simple collation (or none) finds a document by its _id
// exactly.
func TestSimpleCollation(t *testing.T) {
	require.NoError(t, listers.SimpleCollation(nil))
	require.NoError(t, listers.SimpleCollation(&options.Collation{Locale: "simple"}))
	err := listers.SimpleCollation(&options.Collation{Locale: "en", Strength: 2})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.ErrorContains(t, err, `collation option "en"`)
}
