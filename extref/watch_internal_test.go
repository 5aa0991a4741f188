package extref

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestResumeAfter: Watch adds its StartAfter option to the caller's without
// writing into the spare capacity of the caller's slice.
func TestResumeAfter(t *testing.T) {
	mine := options.ChangeStream().SetBatchSize(7)
	backing := []options.Lister[options.ChangeStreamOptions]{mine, mine}
	opts := backing[:1]
	token := bson.Raw(bsonDoc(t, bson.D{{Key: "_data", Value: "1"}}))

	got := resumeAfter(opts, token)
	require.Len(t, got, 2)
	require.Same(t, mine, backing[1], "the spare slot of the caller's array is untouched")
	o, err := listers.Merged(got)
	require.NoError(t, err)
	require.Equal(t, token, o.StartAfter)
	require.EqualValues(t, 7, *o.BatchSize)

	require.Equal(t, opts, resumeAfter(opts, nil), "no token, no option")
}

func bsonDoc(t testing.TB, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

// The tests below drive Watch's loop (watch, follow) with a fake change
// stream, since no server here has change streams; the syncs, the Repair
// and the tokens run on the real server.

// step is what the fake stream does on one TryNext: deliver an event, or
// come back empty (an empty batch), or fail; token is the stream's resume
// token after it (the event's, or the post-batch token).
type step struct {
	event bson.D
	token string
	err   error
}

type fakeStream struct {
	t      *testing.T
	steps  []step
	cur    bson.Raw
	token  bson.Raw
	err    error
	done   func() // called when the steps run out
	closed bool
}

func (f *fakeStream) TryNext(context.Context) bool {
	if len(f.steps) == 0 {
		f.done()
		return false
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	f.token = token(f.t, s.token)
	f.err = s.err
	if s.event == nil {
		return false
	}
	f.cur = bsonDoc(f.t, s.event)
	return true
}

func (f *fakeStream) Decode(v any) error          { return bson.Unmarshal(f.cur, v) }
func (f *fakeStream) ResumeToken() bson.Raw       { return f.token }
func (f *fakeStream) Err() error                  { return f.err }
func (f *fakeStream) Close(context.Context) error { f.closed = true; return nil }

func token(t *testing.T, s string) bson.Raw {
	if s == "" {
		return nil
	}
	return bsonDoc(t, bson.D{{Key: "_data", Value: s}})
}

// memTokens is a TokenStore in memory that records every save.
type memTokens struct {
	saved []string
	fail  error
}

func (m *memTokens) LoadToken(context.Context) (bson.Raw, error) {
	if len(m.saved) == 0 {
		return nil, nil
	}
	return bson.Raw(bsonDocNoT(bson.D{{Key: "_data", Value: m.saved[len(m.saved)-1]}})), nil
}

func (m *memTokens) SaveToken(_ context.Context, token bson.Raw) error {
	if m.fail != nil {
		return m.fail
	}
	m.saved = append(m.saved, token.Lookup("_data").StringValue())
	return nil
}

func bsonDocNoT(d bson.D) []byte {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// watchScene is one customer (1, "Ann") with one order holding a copy
// named "Old", and the repository on the server's plan.
func watchScene(t *testing.T) (*Ref[customerRef], *mongo.Database, bson.ObjectID) {
	db := mongotest.DB(t)
	id := bson.NewObjectID()
	_, err := db.Collection("customers").InsertOne(t.Context(), bson.D{{Key: "_id", Value: id}, {Key: "name", Value: "Ann"}})
	require.NoError(t, err)
	_, err = db.Collection("orders").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}, {Key: "customer", Value: customerRef{ID: id, Name: "Old"}}})
	require.NoError(t, err)
	r, err := New[customerRef](db, Config{Source: "customers", Targets: []Target{{Collection: "orders", Path: "customer"}}})
	require.NoError(t, err)
	return r, db, id
}

func copyName(t *testing.T, db *mongo.Database) string {
	var o struct {
		Customer customerRef `bson:"customer"`
	}
	require.NoError(t, db.Collection("orders").FindOne(t.Context(), bson.D{{Key: "_id", Value: 1}}).Decode(&o))
	return o.Customer.Name
}

// runWatch runs watch on the streams given, one per open, and returns the
// tokens open was given, the streams, and watch's error.
func runWatch(t *testing.T, r *Ref[customerRef], tokens TokenStore, interval time.Duration, streams ...[]step) ([]string, []*fakeStream, error) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var opened []string
	var fakes []*fakeStream
	open := func(_ context.Context, tok bson.Raw) (changeStream, error) {
		at := ""
		if tok != nil {
			at = tok.Lookup("_data").StringValue()
		}
		opened = append(opened, at)
		if len(fakes) == len(streams) {
			return nil, errors.New("no more streams")
		}
		steps := streams[len(fakes)]
		if len(steps) > 0 && steps[0].event == nil && steps[0].token == "" && steps[0].err != nil {
			fakes = append(fakes, nil)
			return nil, steps[0].err // opening fails
		}
		f := &fakeStream{t: t, steps: steps, done: cancel}
		fakes = append(fakes, f)
		return f, nil
	}
	err := r.watch(ctx, tokens, open, interval)
	return opened, fakes, err
}

func update(id bson.ObjectID, fields ...string) bson.D {
	return bson.D{{Key: "operationType", Value: "update"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "updatedFields", Value: fields}}
}

// TestWatchSavesThePostBatchTokenWhileQuiet (issue 21 item 1): with no
// event, Watch saves each post-batch resume token that moved, at most once
// per interval, and after a synced event its token at once.
func TestWatchSavesThePostBatchTokenWhileQuiet(t *testing.T) {
	r, db, id := watchScene(t)
	tokens := &memTokens{}
	opened, _, err := runWatch(t, r, tokens, 0, []step{
		{token: "a"}, {token: "a"}, {token: "b"}, // empty batches
		{event: update(id, "notes"), token: "c"}, // touches no copied field
		{token: "d"},
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{""}, opened, "no saved token: from now")
	require.Equal(t, []string{"a", "b", "c", "d"}, tokens.saved, "each token that moved, once")

	_, err = db.Collection("customers").UpdateByID(t.Context(), id, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Bo"}}}})
	require.NoError(t, err)
	tokens = &memTokens{saved: []string{"z"}}
	opened, _, err = runWatch(t, r, tokens, time.Hour, []step{
		{token: "a"}, {token: "b"}, // throttled: the first is saved, the second waits
		{event: update(id, "name"), token: "c"}, // synced: saved at once
		{token: "d"},
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{"z"}, opened, "from the saved token")
	require.Equal(t, []string{"z", "a", "c"}, tokens.saved)
	require.Equal(t, "Bo", copyName(t, db))
}

// TestWatchRepairsAfterTheHistoryIsLost (issue 21 item 1): a saved token
// older than the oplog (ChangeStreamHistoryLost, 286), when the stream
// opens or later: Watch opens a stream from now, repairs every copy, and
// follows the new stream.
func TestWatchRepairsAfterTheHistoryIsLost(t *testing.T) {
	lost := mongo.CommandError{Code: 286, Name: "ChangeStreamHistoryLost", Message: "Resume of change stream was not possible"}
	for _, when := range []string{"open", "getMore"} {
		t.Run(when, func(t *testing.T) {
			r, db, _ := watchScene(t)
			tokens := &memTokens{saved: []string{"old"}}
			first := []step{{err: lost}}
			if when == "getMore" {
				first = []step{{token: "old", err: lost}}
			}
			opened, fakes, err := runWatch(t, r, tokens, 0, first, []step{{token: "new"}})
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, []string{"old", ""}, opened, "then from now")
			require.Equal(t, "Ann", copyName(t, db), "the Repair synced the copy")
			require.Equal(t, "new", tokens.saved[len(tokens.saved)-1])
			for _, f := range fakes {
				require.True(t, f == nil || f.closed)
			}
		})
	}
}

// TestWatchSavesTheInvalidateToken (issue 21 item 2): the invalidate event
// of a dropped or renamed source ends Watch with an error saying so, after
// its token is saved, so that a restart starts after it.
func TestWatchSavesTheInvalidateToken(t *testing.T) {
	r, _, _ := watchScene(t)
	tokens := &memTokens{}
	_, _, err := runWatch(t, r, tokens, time.Hour, []step{
		{token: "a"},
		{event: bson.D{{Key: "operationType", Value: "invalidate"}}, token: "inv"},
	})
	require.ErrorIs(t, err, errInvalidated)
	require.True(t, strings.HasPrefix(err.Error(), "extref: Watch: change stream on customers: the source collection was dropped or renamed"), err.Error())
	require.Equal(t, []string{"a", "inv"}, tokens.saved)
	opened, _, _ := runWatch(t, r, tokens, time.Hour, []step{})
	require.Equal(t, []string{"inv"}, opened, "a restart starts after the invalidate event")
}

// TestWatchSyncsAnInsertedSource (issue 21 item 6): a source deleted and
// created again with the same _id comes as an insert event: its copies
// are synced.
func TestWatchSyncsAnInsertedSource(t *testing.T) {
	r, db, id := watchScene(t)
	tokens := &memTokens{}
	_, _, err := runWatch(t, r, tokens, time.Hour, []step{
		{event: bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}}}, token: "ins"},
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "Ann", copyName(t, db))
	require.Equal(t, []string{"ins"}, tokens.saved)
}

// TestWatchKeepsTheTokenOfAFailedSync: a sync that fails stops Watch with
// its error and the event's token unsaved.
func TestWatchKeepsTheTokenOfAFailedSync(t *testing.T) {
	r, db, id := watchScene(t)
	_, err := db.Collection("customers").UpdateByID(t.Context(), id, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: 7}}}})
	require.NoError(t, err) // a name the copy type cannot hold
	tokens := &memTokens{}
	_, fakes, err := runWatch(t, r, tokens, 0, []step{{token: "a"}, {event: update(id, "name"), token: "b"}})
	require.Error(t, err)
	require.NotErrorIs(t, err, context.Canceled)
	require.True(t, strings.HasPrefix(err.Error(), "extref: Watch: source "), err.Error())
	require.Equal(t, []string{"a"}, tokens.saved)
	require.True(t, fakes[0].closed)
}
