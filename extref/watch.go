package extref

import (
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
	err := srverr.Retry(ctx, func() error {
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
// touches a copied field, it runs [Ref.Sync] for that document. It blocks
// until ctx is done (it then returns ctx's error) or the stream fails.
//
// With tokens non-nil, Watch starts after the saved resume token (from
// now when none is saved) and saves the stream's token after each sync,
// and after the last event of each batch the server sent, so that a
// restarted Watch neither misses nor (beyond the last batch) replays
// events; replaying is harmless, since Sync is idempotent. With tokens nil
// it starts from now and saves nothing. opts pass through to the change
// stream (batch size, max await time...); Watch sets StartAfter when it
// resumes.
//
// Cost per synced event: the round trips of one Sync and one token save;
// events that touch no copied field cost nothing but their delivery. Events
// for deleted sources are skipped (their copies are left as they are, as
// Sync leaves them), and so is a source that kept changing during every
// round of its sync: the events of those changes follow in the stream. Any
// other failed sync stops Watch with its error, before the token is saved,
// so that the event is retried on restart.
//
// On a server without change streams (a standalone server, FerretDB 1.x),
// Watch returns an [*patterns.UnsupportedError] naming
// [patterns.FeatureChangeStreams] at once; call [Ref.Repair] periodically
// instead.
func (r *Ref[S]) Watch(ctx context.Context, tokens TokenStore, opts ...options.Lister[options.ChangeStreamOptions]) error {
	d, err := r.decide(ctx)
	if err != nil {
		return r.fail("Watch", nil, err)
	}
	if !d.changeStreams {
		return r.fail("Watch", nil, d.unsupported(patterns.FeatureChangeStreams))
	}
	if tokens != nil {
		token, err := tokens.LoadToken(ctx)
		if err != nil {
			return r.fail("Watch", nil, fmt.Errorf("load the resume token: %w", err))
		}
		opts = resumeAfter(opts, token)
	}
	stream, err := r.source.Watch(ctx, changes(), opts...)
	if err != nil {
		return r.fail("Watch", nil, fmt.Errorf("open the change stream on %s: %w", r.source.Name(), err))
	}
	defer stream.Close(context.WithoutCancel(ctx))
	for stream.Next(ctx) {
		var ev event
		if err := stream.Decode(&ev); err != nil {
			return r.fail("Watch", nil, fmt.Errorf("decode event: %w", err))
		}
		synced := false
		if ev.touches(r.ct.fields) {
			_, err := r.sync(ctx, ev.DocumentKey.ID)
			if err != nil && !errors.Is(err, patterns.ErrNotFound) && !errors.Is(err, errSourceChanging) {
				return r.fail("Watch", ev.DocumentKey.ID, err)
			}
			synced = err == nil
		}
		if tokens != nil && (synced || stream.RemainingBatchLength() == 0) {
			if err := tokens.SaveToken(ctx, stream.ResumeToken()); err != nil {
				return r.fail("Watch", nil, fmt.Errorf("save the resume token: %w", err))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := stream.Err(); err != nil {
		return r.fail("Watch", nil, fmt.Errorf("change stream on %s: %w", r.source.Name(), err))
	}
	return r.fail("Watch", nil, fmt.Errorf("the change stream on %s ended (the collection was dropped or renamed)", r.source.Name()))
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

// event is the part of a change event Watch reads.
type event struct {
	OperationType string `bson:"operationType"`
	DocumentKey   struct {
		ID bson.RawValue `bson:"_id"`
	} `bson:"documentKey"`
	UpdateDescription struct {
		UpdatedFields   bson.Raw `bson:"updatedFields"`
		RemovedFields   []string `bson:"removedFields"`
		TruncatedArrays []struct {
			Field string `bson:"field"`
		} `bson:"truncatedArrays"`
	} `bson:"updateDescription"`
}

// touches reports whether the event may have changed a copied field: a
// replacement always may; an update when one of the paths it changed is a
// copied field, inside one, or holds one.
func (ev event) touches(fields []string) bool {
	if ev.OperationType != "update" {
		return true
	}
	var paths []string
	if elems, err := ev.UpdateDescription.UpdatedFields.Elements(); err == nil {
		for _, e := range elems {
			paths = append(paths, e.Key())
		}
	}
	paths = append(paths, ev.UpdateDescription.RemovedFields...)
	for _, t := range ev.UpdateDescription.TruncatedArrays {
		paths = append(paths, t.Field)
	}
	return slices.ContainsFunc(paths, func(p string) bool {
		return slices.ContainsFunc(fields, func(f string) bool { return overlaps(p, f) })
	})
}
