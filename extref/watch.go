package extref

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TokenStore keeps the resume token of a change stream, so that [Ref.Watch]
// continues after a restart where it stopped. [TokenCollection] keeps it in
// a collection; an application can keep it anywhere else.
type TokenStore interface {
	// LoadToken returns the last saved token, or nil when none is saved.
	LoadToken(ctx context.Context) (bson.Raw, error)
	// SaveToken saves token, replacing the previous one.
	SaveToken(ctx context.Context, token bson.Raw) error
}

// TokenCollection is a [TokenStore] that keeps one token per Name in a
// collection, as the document {_id: Name, token: <token>, savedAt: <time>}.
// Several watchers (of several references) can share a collection under
// different names. Both fields are required.
type TokenCollection struct {
	Collection *mongo.Collection
	Name       string
}

var _ TokenStore = TokenCollection{}

func (s TokenCollection) check() error {
	if s.Collection == nil || s.Name == "" {
		return errs.Invalid("TokenCollection: Collection and Name are required")
	}
	return nil
}

// LoadToken reads the saved token: one find by _id. It returns nil, nil
// when none is saved.
func (s TokenCollection) LoadToken(ctx context.Context) (bson.Raw, error) {
	if err := s.check(); err != nil {
		return nil, pkg.Wrap("LoadToken", err)
	}
	var doc struct {
		Token bson.Raw `bson:"token"`
	}
	patterns.OperationFrom(ctx).Sent(1) // in a Watch's operation
	err := s.Collection.FindOne(ctx, byID(s.Name)).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, pkg.Wrap("LoadToken", srverr.Classify(fmt.Errorf("token %q: %w", s.Name, err)))
	}
	return doc.Token, nil
}

// SaveToken saves token: one upsert by _id, sent again (up to 5 times)
// after a transient failure that applied nothing (FerretDB 2.x's "deadlock
// detected"), since it sets the same token either way.
func (s TokenCollection) SaveToken(ctx context.Context, token bson.Raw) error {
	if err := s.check(); err != nil {
		return pkg.Wrap("SaveToken", err)
	}
	if len(token) == 0 {
		return pkg.Wrap("SaveToken", errs.Invalid("token %q: empty token", s.Name))
	}
	op := patterns.OperationFrom(ctx) // a Watch's
	err := srverr.Retry(ctx, func() error {
		op.Sent(1)
		_, err := s.Collection.UpdateOne(ctx, byID(s.Name), saveToken(token, time.Now()), options.UpdateOne().SetUpsert(true))
		return err
	})
	if err != nil {
		return pkg.Wrap("SaveToken", srverr.Classify(fmt.Errorf("token %q: %w", s.Name, err)))
	}
	return nil
}

// Watch keeps the copies in sync from a change stream on the source
// collection: for each update or replacement of a source document that
// touches a copied field, and for each insert (a source deleted and
// created again with the same _id), it runs [Ref.Sync] for that document.
// It blocks until ctx is done (it then returns ctx's error) or the stream
// fails. It reads the sources from the primary, whatever the database's
// read preference: a Sync that read a secondary behind the event could
// find the copies equal to the older value, write nothing, and save the
// token past the change.
//
// The server sends each event projected on what Watch reads (its type,
// documentKey, the names of the fields an update changed or removed), so
// that a replacement near 16 MiB does not make the event too large
// (BSONObjectTooLarge would stop Watch at that event on every restart).
//
// With tokens non-nil, Watch starts after the saved resume token (from
// now when none is saved) and saves the stream's token after each sync
// and, while no event arrives, the post-batch resume token the server
// sends with each empty batch, when it moved and at most once per 10
// seconds: a restarted Watch neither misses nor (beyond those 10 seconds
// and the last batch) replays events, and a source quieter than the
// oplog's window does not leave a token the oplog has dropped. Replaying
// is harmless, since Sync is idempotent. With tokens nil it starts from
// now and saves nothing. opts pass through to the change stream (batch
// size, max await time...); Watch sets StartAfter when it resumes.
//
// If the saved token is older than the oplog's window (MongoDB answers
// ChangeStreamHistoryLost, code 286), the events since it are lost: Watch
// opens a stream from now, runs [Ref.Repair] (which syncs every stale
// copy: its cost is a scan of every target), and then follows the new
// stream, so that no change made during the Repair is missed. A Repair
// that fails ends Watch with its error.
//
// When the source collection is dropped or renamed, MongoDB ends the
// stream with an invalidate event: Watch saves the token of that event and
// returns an error saying so. A restarted Watch starts after the
// invalidate event, on the collection of that name, created again or not.
//
// Cost per synced event: the round trips of one Sync and one token save;
// events that touch no copied field cost nothing but their delivery, and
// a quiet stream one token save per 10 seconds at most. Deletes are not
// followed: the copies of a deleted source keep the value its last sync
// wrote, which is its last value unless it was deleted during a sync (as
// Sync says), and Verify counts them as orphans. Events for sources
// deleted since (or during their sync) are skipped, and so is a source
// that kept changing during every round of its sync: the events of those
// changes follow in the stream. Any other failed sync stops Watch with its error, before the
// token is saved, so that the event is retried on restart.
//
// On a server without change streams (a standalone server, FerretDB),
// Watch returns an [*patterns.UnsupportedError] naming
// [patterns.FeatureChangeStreams] at once; call [Ref.Repair] periodically
// instead.
func (r *Ref[S]) Watch(ctx context.Context, tokens TokenStore, opts ...options.Lister[options.ChangeStreamOptions]) (err error) {
	ctx, op := r.start(ctx, "Watch")
	defer op.Finish(&err)
	d, err := r.decide(ctx)
	if err != nil {
		return r.fail("Watch", nil, err)
	}
	if !d.changeStreams {
		return r.fail("Watch", nil, d.unsupported(patterns.FeatureChangeStreams))
	}
	open := func(ctx context.Context, token bson.Raw) (changeStream, error) {
		op.Sent(1)
		s, err := r.source.Watch(ctx, changes(), resumeAfter(opts, token)...)
		if err != nil {
			return nil, err // a nil *mongo.ChangeStream must not become a non-nil changeStream
		}
		if op != nil {
			return countedStream{s, op}, nil
		}
		return s, nil
	}
	return r.watch(ctx, tokens, open, tokenInterval)
}

// countedStream is a change stream that counts in op the getMores and the
// killCursors it sends (as [obs.Next] and [obs.Close] count a cursor's).
type countedStream struct {
	*mongo.ChangeStream
	op *patterns.Operation
}

func (s countedStream) TryNext(ctx context.Context) bool {
	if s.RemainingBatchLength() == 0 && s.ID() != 0 {
		s.op.Sent(1)
	}
	return s.ChangeStream.TryNext(ctx)
}

func (s countedStream) Close(ctx context.Context) error {
	if s.ID() != 0 {
		s.op.Sent(1)
	}
	return s.ChangeStream.Close(ctx)
}

// tokenInterval is the least time between two saves of the post-batch
// resume token while no event arrives.
const tokenInterval = 10 * time.Second

// changeStream is what Watch reads of a change stream, as
// *mongo.ChangeStream provides it.
type changeStream interface {
	// TryNext moves to the next event, asking the server once when the
	// current batch is done; false when none came (or on an error).
	TryNext(ctx context.Context) bool
	Decode(val any) error
	// ResumeToken is the token of the last event read, or the
	// post-batch resume token of the last batch when it holds no more.
	ResumeToken() bson.Raw
	Err() error
	Close(ctx context.Context) error
}

// errInvalidated ends Watch when the stream's collection was dropped or
// renamed.
var errInvalidated = errors.New("the source collection was dropped or renamed (the change stream was invalidated; its token is saved, and a restarted Watch starts after it)")

// watch is Watch on the streams open returns (from the saved token, or
// from now with a nil token), saving the post-batch token at most once per
// interval while no event arrives.
func (r *Ref[S]) watch(ctx context.Context, tokens TokenStore, open func(context.Context, bson.Raw) (changeStream, error), interval time.Duration) error {
	var token bson.Raw
	if tokens != nil {
		var err error
		if token, err = tokens.LoadToken(ctx); err != nil {
			return r.fail("Watch", nil, fmt.Errorf("load the resume token: %w", err))
		}
	}
	stream, err := open(ctx, token)
	for {
		if historyLost(err) {
			stream, err = r.restart(ctx, open)
		}
		if err != nil {
			return r.fail("Watch", nil, fmt.Errorf("open the change stream on %s: %w", r.source.Name(), err))
		}
		err = r.follow(ctx, stream, tokens, interval)
		_ = stream.Close(context.WithoutCancel(ctx)) // the stream's error, if any, is err
		if !historyLost(err) {
			break
		}
	}
	var ev eventError
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return ctx.Err()
	case errors.As(err, &ev):
		return r.fail("Watch", ev.id, ev.err)
	}
	return r.fail("Watch", nil, err)
}

// historyLost reports whether err is MongoDB's ChangeStreamHistoryLost:
// the resume token is older than the oplog's window.
func historyLost(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(286)
}

// restart is Watch's answer to a lost history: a stream from now, then a
// Repair of every copy, so that the changes made before the stream opened
// are synced by the Repair and those after it by the stream.
func (r *Ref[S]) restart(ctx context.Context, open func(context.Context, bson.Raw) (changeStream, error)) (changeStream, error) {
	stream, err := open(ctx, nil)
	if err != nil {
		return nil, err
	}
	rctx, op := r.start(ctx, "Repair") // nested in Watch's operation
	_, err = r.scan(rctx, true, ScanOptions{})
	op.End(err)
	if err != nil {
		_ = stream.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("the change stream's history since the saved token is lost (ChangeStreamHistoryLost), and the Repair that replaces it failed: %w", err)
	}
	return stream, nil
}

// eventError is the failed sync of one event's source.
type eventError struct {
	id  any
	err error
}

func (e eventError) Error() string { return e.err.Error() }
func (e eventError) Unwrap() error { return e.err }

// follow syncs the sources of stream's events until ctx is done, the
// stream fails or it is invalidated, saving tokens as Watch says.
func (r *Ref[S]) follow(ctx context.Context, stream changeStream, tokens TokenStore, interval time.Duration) error {
	var saved bson.Raw
	var savedAt time.Time
	save := func(now bool) error {
		token := stream.ResumeToken()
		if tokens == nil || len(token) == 0 || bytes.Equal(token, saved) || (!now && time.Since(savedAt) < interval) {
			return nil
		}
		if err := tokens.SaveToken(ctx, token); err != nil {
			return fmt.Errorf("save the resume token: %w", err)
		}
		saved, savedAt = slices.Clone(token), time.Now()
		return nil
	}
	for {
		if !stream.TryNext(ctx) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := stream.Err(); err != nil {
				return fmt.Errorf("change stream on %s: %w", r.source.Name(), err)
			}
			if err := save(false); err != nil { // quiet: the post-batch token
				return err
			}
			continue
		}
		var ev event
		if err := stream.Decode(&ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		if ev.OperationType == "invalidate" {
			if err := save(true); err != nil {
				return err
			}
			return fmt.Errorf("change stream on %s: %w", r.source.Name(), errInvalidated)
		}
		synced := false
		if ev.touches(r.ct.fields) {
			sctx, op := r.start(ctx, "Sync") // nested in Watch's operation
			_, err := r.sync(sctx, ev.DocumentKey.ID)
			op.End(err)
			if err != nil && !errors.Is(err, patterns.ErrNotFound) && !errors.Is(err, errSourceChanging) {
				return eventError{id: ev.DocumentKey.ID, err: err}
			}
			synced = err == nil
		}
		if err := save(synced); err != nil {
			return err
		}
	}
}

// resumeAfter returns opts followed by the option that starts the change
// stream after token, or opts when token is nil. It never writes into the
// spare capacity of the caller's array.
func resumeAfter(opts []options.Lister[options.ChangeStreamOptions], token bson.Raw) []options.Lister[options.ChangeStreamOptions] {
	if token == nil {
		return opts
	}
	return append(slices.Clip(opts), options.ChangeStream().SetStartAfter(token))
}

// event is the part of a change event Watch reads, as [changes] projects
// it.
type event struct {
	OperationType string `bson:"operationType"`
	DocumentKey   struct {
		ID bson.RawValue `bson:"_id"`
	} `bson:"documentKey"`
	// UpdatedFields are the names of the fields an update changed.
	UpdatedFields     []string `bson:"updatedFields"`
	UpdateDescription struct {
		RemovedFields   []string `bson:"removedFields"`
		TruncatedArrays []struct {
			Field string `bson:"field"`
		} `bson:"truncatedArrays"`
	} `bson:"updateDescription"`
}

// touches reports whether the event may have changed a copied field: an
// insert or a replacement always may; an update when one of the paths it
// changed is a copied field, inside one, or holds one.
func (ev event) touches(fields []string) bool {
	if ev.OperationType != "update" {
		return true
	}
	paths := slices.Concat(ev.UpdatedFields, ev.UpdateDescription.RemovedFields)
	for _, t := range ev.UpdateDescription.TruncatedArrays {
		paths = append(paths, t.Field)
	}
	return slices.ContainsFunc(paths, func(p string) bool {
		return slices.ContainsFunc(fields, func(f string) bool { return overlaps(p, f) })
	})
}
