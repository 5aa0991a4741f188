package versioning_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TestWritesRefuseDocumentsPast16MiB: no write stores a document larger
// than 16 MiB, on any server (FerretDB 1.x would store one): Insert and
// Replace check the encoded document before sending anything.
func TestWritesRefuseDocumentsPast16MiB(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		r, db, coll, before := withAda(t, p)
		big := strings.Repeat("x", 17<<20)
		c := mongotest.NewCounter(t, db)

		_, err := r.Insert(ctx, User{ID: "big", First: big})
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.Regexp(t, `^versioning: Insert: document "big" of users: 178\d{5} bytes, over the 16777216-byte limit: document too large$`, err.Error())

		err = r.Replace(ctx, "a", User{ID: "a", First: big})
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.Regexp(t, `^versioning: Replace: document "a" of users: 178\d{5} bytes, over the 16777216-byte limit: document too large$`, err.Error())

		require.Empty(t, c.Commands(), "refused before anything is sent")
		require.Equal(t, before, stored(t, coll, "a"))
		n, err := coll.CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	})
}

// TestUpdatePast16MiBIsUndone: an update whose result would pass 16 MiB
// fails with ErrTooLarge and leaves the document as it was: refused by
// the server where it limits updates, put back by the repository where it
// does not. The plan that checks sizes itself, forced on a server that
// limits updates, meets the server's refusal at its findAndModify: there
// is nothing to put back.
func TestUpdatePast16MiBIsUndone(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		r, db, coll, before := withAda(t, p)
		c := mongotest.NewCounter(t, db)

		// A small document and a large update: the embedded server takes
		// seconds per command on documents of megabytes.
		err := r.Update(ctx, "a", bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: strings.Repeat("y", 17<<20)}}}})
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		switch {
		case p.ServerSizeLimit:
			require.Equal(t, []string{"update"}, c.Commands(), "the server refuses it")
		case mongotest.Server().Has(patterns.FeatureUpdateSizeLimit):
			require.Equal(t, []string{"find", "findAndModify"}, c.Commands(), "read, then the update, which the server refuses")
		default:
			require.Equal(t, []string{"find", "findAndModify", "update"}, c.Commands(), "read, update returning the result, put the document read back")
			require.Regexp(t, `^versioning: Update: document "a" of users: 178\d{5} bytes after the update, over the 16777216-byte limit \(the previous document was put back\): document too large$`, err.Error())
		}
		require.Equal(t, before, stored(t, coll, "a"), "the document is as it was")
	})
}

// TestUpdatePast16MiBMeetingAWriter: on a server that does not limit
// updates, a write that lands between Update's oversized findAndModify and
// the put-back is not undone: the put-back misses, and the error says the
// update stays. A server that limits updates never stores the oversized
// document, so there is no put-back to meet: the test needs one that
// stores it (FerretDB 1.x).
func TestUpdatePast16MiBMeetingAWriter(t *testing.T) {
	if mongotest.Server().Has(patterns.FeatureUpdateSizeLimit) {
		t.Skipf("skipped: %s refuses an update past 16 MiB itself: there is nothing to put back", mongotest.Server())
	}
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		if p.ServerSizeLimit {
			t.Skip("skipped: the plan lets the server refuse the update: there is nothing to put back")
		}
		ctx := context.Background()
		r, db, coll, _ := withAda(t, p)
		big := strings.Repeat("y", 17<<20)
		other := mongotest.NewClient(t).Database(db.Name()).Collection("users")
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
			// Another writer, setting a new revision as a Repo does,
			// between the findAndModify and the put-back.
			_, err := other.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_rev", Value: bson.NewObjectID()}, {Key: "locale", Value: "de"}}}})
			require.NoError(t, err)
		})

		err := r.Update(ctx, "a", bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: big}}}})
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		require.ErrorContains(t, err, "a concurrent write changed the document before the previous one was put back, so the update stays")
		after := stored(t, coll, "a")
		require.Equal(t, big, after.Lookup("last").StringValue(), "the update stays")
		require.Equal(t, "de", after.Lookup("locale").StringValue(), "the other write is not undone")
	})
}
