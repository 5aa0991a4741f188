package validation

import (
	"bytes"
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Apply makes v the validator of db's collection, with validationLevel
// level and validationAction action (empty: [Strict] and [Error]): it
// creates the collection with it, or sets it with collMod on one that
// exists, then reads the collection's options back and returns an error
// unless the server kept exactly the validator, level and action sent.
// When the collection holds no validator, the server ignored the command
// and the error wraps [patterns.ErrUnsupported]; when it holds another
// one (a third, or the one it had before, re-applied by an older release
// in a rolling deploy), another caller set its own between Apply's
// command and the read-back, and the error wraps [patterns.ErrConflict]
// (the other's validator stays; running Apply again sets this one). It
// never reports success for a validator that is not in force.
//
// Cost: three commands (listCollections, create or collMod,
// listCollections), four where create does not take a validator (create,
// then collMod), five where it does and another caller created the
// collection first with other options (listCollections, create, which
// fails, listCollections, collMod, listCollections), plus two once per
// client to learn the server's features. Running it again is safe: each command sets the same state,
// and a create that fails because another process created the collection
// meanwhile is followed by collMod. Writers see the old validator (or
// none) until the create or collMod is applied, and the new one after;
// where create does not take a validator, a writer between create and
// collMod meets a collection without one: run [Check] after Apply to
// find what got in.
//
// The validator is [Validator.Document] on a server with every
// $jsonSchema keyword ([patterns.FeatureJSONSchema]), and
// [Validator.Portable] on one with only [patterns.FeatureValidators]
// (FerretDB 2.x, which ignores a validator given at create, so Apply
// sets it with collMod there); a v without a portable form is refused
// there with [patterns.ErrUnsupported]. A server without validators
// (FerretDB 1.x) gets [patterns.ErrUnsupported] naming
// [patterns.FeatureValidators] before anything is sent. Apply does not
// check the documents already stored: [Check] does.
func Apply(ctx context.Context, db *mongo.Database, collection string, v *Validator, level Level, action Action) (err error) {
	ctx, op := start(ctx, v, "Apply", db, collection)
	defer op.Finish(&err)
	if db == nil {
		return pkg.Wrap("Apply", errs.Invalid("nil database"))
	}
	if err := v.usable(); err != nil {
		return pkg.Wrap("Apply", err)
	}
	srv, err := patterns.Capabilities(ctx, db.Client())
	if err != nil {
		return pkg.Wrap("Apply", fmt.Errorf("detect the server: %w", err))
	}
	return apply(ctx, db, collection, v, level, action, planFor(srv), srv.String())
}

// apply is Apply on plan p for the server named server.
func apply(ctx context.Context, db *mongo.Database, name string, v *Validator, level Level, action Action, p plan, server string) error {
	op := patterns.OperationFrom(ctx)
	if op != nil { // Path allocates: only for a hook
		op.SetPlan(p.Path())
	}
	level, action, err := settings(name, level, action)
	if err != nil {
		return pkg.Wrap("Apply", err)
	}
	validator, err := p.validator(v, server)
	if err != nil {
		return pkg.Wrap("Apply", err)
	}
	_, exists, err := collOptions(ctx, db, name)
	if err != nil {
		return pkg.Wrap("Apply", err)
	}
	collMod := exists || !p.CreateWithValidator
	if !exists {
		err := srverr.Retry(ctx, func() error {
			op.Sent(1)
			return db.RunCommand(ctx, p.createCommand(name, validator, level, action)).Err()
		})
		if err != nil {
			if _, exists, lerr := collOptions(ctx, db, name); lerr != nil || !exists {
				return pkg.Wrap("Apply", fmt.Errorf("create %s: %w", name, srverr.Classify(err)))
			}
			collMod = true // created meanwhile by another caller
		}
	}
	if collMod {
		err := srverr.Retry(ctx, func() error {
			op.Sent(1)
			return db.RunCommand(ctx, collModCommand(name, validator, level, action)).Err()
		})
		if err != nil {
			return pkg.Wrap("Apply", fmt.Errorf("set the validator of %s: %w", name, srverr.Classify(err)))
		}
	}
	opts, exists, err := collOptions(ctx, db, name)
	if err != nil {
		return pkg.Wrap("Apply", err)
	}
	if !exists {
		return pkg.Wrap("Apply", fmt.Errorf("%s: dropped by another caller before its options were read back", name))
	}
	if err := kept(opts, validator, level, action); err != nil {
		if ignored(opts) {
			return pkg.Wrap("Apply", fmt.Errorf("%s: %w: %w", name, err,
				&patterns.UnsupportedError{Feature: patterns.FeatureValidators, Server: server}))
		}
		// Another caller set its own meanwhile (a third setting, or the
		// one that was there, re-applied by an older release).
		return pkg.Wrap("Apply", fmt.Errorf("%s: %w: another caller set the validator meanwhile: %w", name, err, patterns.ErrConflict))
	}
	return nil
}

// ignored reports whether the options read back after Apply's command
// show a server that ignored it rather than another caller that set its
// own: no validator at all (a server that takes none, or ignores one
// given at create), since another caller's Apply always sets one.
func ignored(opts bson.Raw) bool {
	v, ok := opts.Lookup("validator").DocumentOK()
	return !ok || len(v) <= 5 // {} validates nothing
}

// settings checks the collection name, level and action, and fills in
// the defaults.
func settings(name string, level Level, action Action) (Level, Action, error) {
	if err := check.Collection(name); err != nil {
		return "", "", err
	}
	switch level {
	case "":
		level = Strict
	case Strict, Moderate:
	default:
		return "", "", errs.Invalid("validationLevel %q", level)
	}
	switch action {
	case "":
		action = Error
	case Error, Warn:
	default:
		return "", "", errs.Invalid("validationAction %q", action)
	}
	return level, action, nil
}

// collOptions returns the options of db's collection name as listCollections
// gives them, and whether it exists.
func collOptions(ctx context.Context, db *mongo.Database, name string) (bson.Raw, bool, error) {
	patterns.OperationFrom(ctx).Sent(1)
	specs, err := db.ListCollectionSpecifications(ctx, listFilter(name))
	if err != nil {
		return nil, false, fmt.Errorf("list collection %s: %w", name, srverr.Classify(err))
	}
	if len(specs) == 0 {
		return nil, false, nil
	}
	return specs[0].Options, true, nil
}

// kept returns nil when opts hold exactly validator, level and action.
func kept(opts bson.Raw, validator bson.D, level Level, action Action) error {
	want, err := bson.Marshal(validator)
	if err != nil {
		return err
	}
	got, ok := opts.Lookup("validator").DocumentOK()
	if !ok || !bytes.Equal(got, want) {
		return fmt.Errorf("the server kept validator %v, not the one sent", got)
	}
	if l, _ := opts.Lookup("validationLevel").StringValueOK(); l != string(level) {
		return fmt.Errorf("the server kept validationLevel %q, not %q", l, level)
	}
	if a, _ := opts.Lookup("validationAction").StringValueOK(); a != string(action) {
		return fmt.Errorf("the server kept validationAction %q, not %q", a, action)
	}
	return nil
}
