package outlier

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAttackAppendArrayWithNullElements: a parent written by other means
// whose array holds null elements (a []*comment with nil pointers, as the
// driver encodes it) beside an item. The native plan reads the parent
// through the projection {comments._id: 1} (commands.go,
// stateProjection: "the item ids (the length of the array follows from
// them)"), and MongoDB's inclusion projection of a dotted path drops the
// array's non-document elements (jira.mongodb.org DOCS-13322 /
// SERVER-6527: {'a.b': 1} over {a: [1, {b: 2}, {c: 3}]} returns
// {a: [{b: 2}, {}]}; FerretDB 1.24 and 2.7 do the same), so the
// count read is lower than the {$size: n} the guards compare with. The
// push after the read ({$or: [{comments.<Cap-k>: {$exists: false}},
// {comments: {$size: n}}]}) and the close ({comments: {$size: held}})
// then never match, and Append loops to ErrConflict with no other
// writer.
//
// Promises: append.go Append godoc "after 100 misses in a row Append gives
// up with [patterns.ErrConflict]" after "A push that matches nothing
// (another process appended first, or a retried Append finds its items
// there)", and maxMisses' doc "Every miss means another writer made
// progress on the same parent"; commands.go pushParentCommand: "once
// read, exactly the n items read. The "or" is what makes it exact".
// The portable plan (whole parent read, n = 3) closed the parent and
// appended to overflow, leaving a parent that Get and Page cannot decode.
//
// Fixed: a parent whose array holds an element that is not a document is
// [patterns.ErrInvalid] naming the element, as [Repo.Insert] says of one
// (append.go, documents), with the stored data untouched: the portable
// plan sees it in the parent it reads; the native plan, whose projection
// drops it, reads the array whole once a push missed with the parent read
// the same before and after it (checkElements).
func TestAttackAppendArrayWithNullElements(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	indexed, err := New[post, comment](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, indexed.Indexes()...))
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		parents++
		id := parents
		stored := bson.D{{Key: "_id", Value: id},
			{Key: "comments", Value: bson.A{nil, nil, bson.D{{Key: "_id", Value: "a"}}}}}
		_, err = r.parents.InsertOne(ctx, stored)
		require.NoError(t, err)
		// Unchecked, Append sends 201 commands and returns ErrConflict
		// (over a second on FerretDB 2.7): stop it after 10 updates.
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		updates := 0
		mongotest.OnCommand(t, db, "update", func(context.Context) {
			if updates++; updates == 10 {
				cancel()
			}
		})
		c := mongotest.NewCounter(t, db)
		var aerr error
		got := c.Count(func() { aerr = r.Append(actx, id, comment{ID: "x"}) })
		t.Logf("Append: %v; %d commands, %d updates", aerr, len(got), updates)
		require.False(t, errors.Is(aerr, patterns.ErrConflict), "ErrConflict with no other writer: %v", aerr)
		require.ErrorIs(t, aerr, patterns.ErrInvalid)
		require.ErrorContains(t, aerr, "comments.0 is a BSON null, not a document")
		require.LessOrEqual(t, len(got), 5, "commands: %v", got)
		var now bson.D
		require.NoError(t, r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&now))
		require.Equal(t, fmt.Sprint(stored), fmt.Sprint(now), "the stored parent untouched")
		n, err := r.overflow.CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.Zero(t, n, "no overflow written")
	})
}

// TestAttackAppendArrayIsDocument: a parent written by other means whose
// array field holds a document ({"0": {...}}, an array saved as a map).
// commands.go, array: "an error wrapping [patterns.ErrInvalid] when the
// field holds something else" (and newArray: "If that matches nothing,
// the field holds a value that is not an array (an error wrapping
// [patterns.ErrInvalid])"). The portable plan reads it first and says
// ErrInvalid; the native plan's first push is guarded by {comments:
// {$ne: null}} and {comments.<Cap-1>: {$exists: false}}, which a
// document matches, so the server's $push error comes back instead
// (MongoDB: "The field 'comments' must be an array but is of type
// object", code 2 BadValue).
//
// Fixed: the push guards on {comments: {$type: "array"}} (commands.go,
// isArray), so it misses, and the read that follows says ErrInvalid.
func TestAttackAppendArrayIsDocument(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		parents++
		id := parents
		_, err = r.parents.InsertOne(ctx, bson.D{{Key: "_id", Value: id},
			{Key: "comments", Value: bson.D{{Key: "0", Value: bson.D{{Key: "_id", Value: "a"}}}}}})
		require.NoError(t, err)
		aerr := r.Append(ctx, id, comment{ID: "x"})
		t.Logf("Append: %v", aerr)
		require.ErrorIs(t, aerr, patterns.ErrInvalid, fmt.Sprint(aerr))
	})
}

// TestAttackAppendNullArrayCost counts the commands of an Append of one
// item to a parent whose array is null (written by other means), against
// append.go's Append godoc: "a parent whose array is null or absent gets
// an empty one first (one command more)", on "an open parent, 1 (the
// guarded push)" (native) or 2 (portable: "the parent is read whole
// first ... an open parent costs 2"). appendItems reads the parent
// again after the newArray (misses++; continue: "read again: the array is
// there now"), and on the native plan the first push misses ({comments:
// {$ne: null}}) and costs its read: even counting that miss as the godoc
// prices one, the null array costs two commands more (the newArray and a
// second read), not one.
//
// Fixed: after the newArray that matched, Append goes on from the parent
// it read, with an empty array, and does not read it again; the godoc
// prices the push sent before the read, which misses on null, on the
// native plan.
func TestAttackAppendNullArrayCost(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		parents++
		id := parents
		_, err = r.parents.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "comments", Value: nil}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		got := c.Count(func() { require.NoError(t, r.Append(ctx, id, comment{ID: "x"})) })
		t.Logf("sent %v", got)
		want := 3 // portable: read, newArray, push
		if p.serverSizeLimit {
			// native, generously: the push that misses on null and what
			// the godoc charges a miss ("a read and a push more"), plus
			// the newArray: push, find, newArray, push
			want = 4
		}
		require.Len(t, got, want, "sent %v", got)
	})
}
