package extref_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestWatchUnsupported: on a plan without change streams, Watch returns at
// once an UnsupportedError naming the feature.
func TestWatchUnsupported(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		if has(p, patterns.FeatureChangeStreams) {
			t.Skip("skipped: the plan has change streams (TestWatch)")
		}
		r := customerRefs(t, mongotest.DB(t), p)
		err := r.Watch(ctx, nil)
		require.ErrorIs(t, err, patterns.ErrUnsupported)
		var ue *patterns.UnsupportedError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, patterns.FeatureChangeStreams, ue.Feature)
		require.Equal(t, mongotest.Server().String(), ue.Server)
		require.True(t, strings.HasPrefix(err.Error(), "extref: Watch: unsupported by the server: "), err.Error())
	})
}

// TestWatch: a change stream on customers keeps the orders' copies in
// sync; stopped and restarted from its saved token, it catches up on the
// renames made while it was down.
func TestWatch(t *testing.T) {
	mongotest.Require(t, patterns.FeatureChangeStreams)
	db, r := withOrders(t, 3, 9)
	tokens := extref.TokenCollection{Collection: db.Collection("tokens"), Name: "customers->orders"}

	start := func() (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Watch(wctx, tokens) }()
		return func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}
	}
	waitFor := func(id int, name string) {
		t.Helper()
		require.Eventually(t, func() bool {
			n, err := db.Collection("orders").CountDocuments(ctx, bson.D{{Key: "customer.id", Value: id}, {Key: "customer.name", Value: name}})
			return err == nil && n == 3
		}, 30*time.Second, 50*time.Millisecond, "customer %d's orders renamed %q", id, name)
	}

	// Start from a token taken now, so that the first rename is seen
	// however long Watch takes to open its stream.
	cs, err := db.Collection("customers").Watch(ctx, mongo.Pipeline{})
	require.NoError(t, err)
	require.NoError(t, tokens.SaveToken(ctx, cs.ResumeToken()))
	require.NoError(t, cs.Close(ctx))

	stop := start()
	rename(t, db.Collection("customers"), 1, "First")
	waitFor(1, "First")
	stop()
	token, err := tokens.LoadToken(ctx)
	require.NoError(t, err)
	require.NotNil(t, token)

	rename(t, db.Collection("customers"), 2, "While down")
	stop = start()
	defer stop()
	waitFor(2, "While down")
	require.Equal(t, []int64{0}, verifyStale(t, r))
}

// TestWatchRetriesAFailedSyncOnRestart backs Watch's "a failed sync stops
// Watch with its error, before the token is saved, so that the event is
// retried on restart": a unique index on the copies' email makes the sync
// of a customer who took another's email fail; Watch stops with that
// error and the saved token stays before the event; with the index gone,
// a restarted Watch replays the event and syncs the copy.
func TestWatchRetriesAFailedSyncOnRestart(t *testing.T) {
	mongotest.Require(t, patterns.FeatureChangeStreams)
	db, r := withOrders(t, 2, 2) // one order per customer
	_, err := db.Collection("orders").Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "customer.email", Value: 1}}, Options: options.Index().SetUnique(true).SetName("unique_email"),
	})
	require.NoError(t, err)
	tokens := extref.TokenCollection{Collection: db.Collection("tokens"), Name: "customers->orders"}
	cs, err := db.Collection("customers").Watch(ctx, mongo.Pipeline{})
	require.NoError(t, err)
	before := cs.ResumeToken()
	require.NoError(t, tokens.SaveToken(ctx, before))
	require.NoError(t, cs.Close(ctx))

	_, err = db.Collection("customers").UpdateByID(ctx, 1, set("email", "c2@example.com"))
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = r.Watch(wctx, tokens)
	require.True(t, mongo.IsDuplicateKeyError(err), "Watch stops with the sync's error: %v", err)
	saved, err := tokens.LoadToken(ctx)
	require.NoError(t, err)
	require.Equal(t, before, saved, "the token is not saved past the event whose sync failed")

	require.NoError(t, db.Collection("orders").Indexes().DropOne(ctx, "unique_email"))
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Watch(wctx, tokens) }()
	require.Eventually(t, func() bool {
		n, err := db.Collection("orders").CountDocuments(ctx, bson.D{{Key: "customer.id", Value: 1}, {Key: "customer.email", Value: "c2@example.com"}})
		return err == nil && n == 1
	}, 30*time.Second, 50*time.Millisecond, "the restarted Watch replays the event")
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestTokenCollection stores and loads resume tokens for real.
func TestTokenCollection(t *testing.T) {
	db := mongotest.DB(t)
	a := extref.TokenCollection{Collection: db.Collection("tokens"), Name: "a"}
	b := extref.TokenCollection{Collection: db.Collection("tokens"), Name: "b"}
	got, err := a.LoadToken(ctx)
	require.NoError(t, err)
	require.Nil(t, got, "nothing saved yet")

	tok := func(s string) bson.Raw {
		raw, err := bson.Marshal(bson.D{{Key: "_data", Value: s}})
		require.NoError(t, err)
		return raw
	}
	require.NoError(t, a.SaveToken(ctx, tok("1")))
	require.NoError(t, a.SaveToken(ctx, tok("2")))
	require.NoError(t, b.SaveToken(ctx, tok("9")))
	got, err = a.LoadToken(ctx)
	require.NoError(t, err)
	require.Equal(t, tok("2"), got)
	got, err = b.LoadToken(ctx)
	require.NoError(t, err)
	require.Equal(t, tok("9"), got)
	n, err := db.Collection("tokens").CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	require.ErrorIs(t, a.SaveToken(ctx, nil), patterns.ErrInvalid)
	for _, bad := range []extref.TokenCollection{{}, {Collection: db.Collection("tokens")}, {Name: "x"}} {
		_, err := bad.LoadToken(ctx)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorIs(t, bad.SaveToken(ctx, tok("1")), patterns.ErrInvalid)
	}
}
