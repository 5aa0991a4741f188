package versioning_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestFindWithCollation: Find's godoc (versioning/read.go:58):
// "each document once, whatever others write meanwhile and whatever its
// _id"; "Options pass through to the driver, except those that would
// break the order or hide fields, refused with [patterns.ErrInvalid]: a
// projection ..., a sort other than {_id: 1}, and Skip". A collation
// passes through, and changes how the server compares strings in the
// page's {_id: {$gt: last}} and sort (manual, Collation: strength 2
// compares "a" and "A" as equal), while the _id index keeps "a" and "A"
// apart: after a page ending on "A", {$gt: "A"} misses "a". The option
// must either be refused with ErrInvalid or every document yielded once.
func TestFindWithCollation(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newUsers(t, db, serverPlan())
	for _, id := range []string{"A", "a", "b", "B"} {
		_, err := db.Collection("users").InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "schemaVersion", Value: int32(3)},
			{Key: "first", Value: id}, {Key: "last", Value: "x"}, {Key: "email", Value: "e"}, {Key: "locale", Value: "en"}})
		require.NoError(t, err)
	}
	var got []string
	defer func() { mongotest.Detail(t, "got %v", got) }()
	for u, err := range r.Find(ctx, nil, options.Find().SetBatchSize(1).SetCollation(&options.Collation{Locale: "en", Strength: 2})) {
		if err != nil {
			if errors.Is(err, patterns.ErrInvalid) {
				return
			}
			t.Skipf("the server refuses the collation: %v", err)
		}
		got = append(got, u.ID)
	}
	require.ElementsMatch(t, []string{"A", "a", "b", "B"}, got, "every document once")
}
