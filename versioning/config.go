package versioning

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Defaults of [Config].
const (
	// DefaultField is the field that holds a document's schema version.
	DefaultField = "schemaVersion"
	// DefaultRevisionField is the field that holds a document's revision:
	// a new ObjectID at every write through a [Repo].
	DefaultRevisionField = "_rev"
)

// Migration upgrades a stored document from version From to From+1.
type Migration struct {
	// From is the version the migration reads; it produces From+1.
	From int
	// Up rewrites the document in place. It must be a pure function of the
	// document: it may run several times for one document (readers racing
	// on it, a MigrateAll that is cancelled and run again) and only one
	// result is ever stored. It need not touch the version or revision
	// fields: the repository sets them after the last step. An error
	// leaves the stored document untouched and is reported as a
	// [*MigrationError].
	Up func(d *Doc) error
}

// Config configures a [Repo]. Collection, Current and, when Current is
// above 1, Migrations are required; the other fields have working zero
// values.
type Config struct {
	// Collection holds the documents.
	Collection string

	// Current is the version of the shape T: the version every write
	// stamps and every read returns. At least 1.
	Current int

	// Migrations form a chain without gaps from the oldest version this
	// code reads to Current: one migration for each From in
	// oldest..Current-1, in any order. With none, Current is the only
	// version read.
	Migrations []Migration

	// Field holds the schema version in each document, as an integer;
	// empty means [DefaultField].
	Field string

	// RevisionField holds the document's revision, a new ObjectID at
	// every write through a Repo; the write-back of a migrated document is
	// conditional on it (see [Repo]). Empty means [DefaultRevisionField].
	RevisionField string

	// Implicit is the version of a document that lacks Field (documents
	// written before versioning was adopted); 0 means 1. It must be a
	// version this code reads: between the oldest migration and Current.
	Implicit int

	// NoWriteBack turns off the write-back of documents migrated by Get
	// and Find, which then only read (for read-only credentials or
	// secondaries). Update, MigrateAll and Replace still write.
	NoWriteBack bool
}

// New returns a repository over db's collection cfg.Collection. It checks
// the configuration and returns an error wrapping [patterns.ErrInvalid]
// naming what is wrong: a missing collection, an invalid or reserved field
// name, Current below 1, a migration without a function, two migrations
// from one version, a migration from Current or beyond, a gap in the chain,
// or an implicit version outside the versions this code reads.
//
// New sends nothing and creates no index: see [Repo.Indexes].
func New[T any](db *mongo.Database, cfg Config) (*Repo[T], error) {
	r, err := newRepo[T](db, cfg)
	if err != nil {
		return nil, fmt.Errorf("versioning.New: %w", err)
	}
	return r, nil
}

func newRepo[T any](db *mongo.Database, cfg Config) (*Repo[T], error) {
	if db == nil {
		return nil, errs.Invalid("nil database")
	}
	if cfg.Collection == "" || strings.ContainsAny(cfg.Collection, "$\x00") {
		return nil, errs.Invalid("collection name %q: want a non-empty name without '$' or NUL", cfg.Collection)
	}
	field := cmp.Or(cfg.Field, DefaultField)
	rev := cmp.Or(cfg.RevisionField, DefaultRevisionField)
	for _, f := range []struct{ what, name string }{{"Field", field}, {"RevisionField", rev}} {
		if err := check.Field(f.name); err != nil {
			return nil, fmt.Errorf("%s: %w", f.what, err)
		}
		if f.name == "_id" {
			return nil, errs.Invalid("%s: %q is the document id", f.what, f.name)
		}
	}
	if field == rev {
		return nil, errs.Invalid("Field and RevisionField are both %q", field)
	}
	if cfg.Current < 1 || cfg.Current > math.MaxInt32 {
		return nil, errs.Invalid("Current is %d: want a version from 1 to %d", cfg.Current, math.MaxInt32)
	}

	migs := slices.SortedFunc(slices.Values(cfg.Migrations), func(a, b Migration) int { return a.From - b.From })
	oldest := cfg.Current
	if len(migs) > 0 {
		oldest = migs[0].From
	}
	if oldest < 1 {
		return nil, errs.Invalid("a migration from version %d: versions start at 1", oldest)
	}
	steps := make([]func(*Doc) error, len(migs))
	for i, m := range migs {
		switch want := oldest + i; {
		case m.Up == nil:
			return nil, errs.Invalid("the migration from version %d has no Up function", m.From)
		case m.From >= cfg.Current:
			return nil, errs.Invalid("a migration from version %d, but Current is %d", m.From, cfg.Current)
		case m.From < want:
			return nil, errs.Invalid("two migrations from version %d", m.From)
		case m.From > want:
			return nil, errs.Invalid("no migration from version %d: the chain from %d to %d has a gap", want, oldest, cfg.Current)
		}
		steps[i] = m.Up
	}
	if len(migs) > 0 && migs[len(migs)-1].From != cfg.Current-1 {
		return nil, errs.Invalid("no migration from version %d: the chain from %d must reach Current %d", migs[len(migs)-1].From+1, oldest, cfg.Current)
	}

	implicit := cmp.Or(cfg.Implicit, 1)
	if implicit < oldest || implicit > cfg.Current {
		return nil, errs.Invalid("Implicit is version %d: documents without %q must be at a version this code reads, %d to %d (set Implicit)", implicit, field, oldest, cfg.Current)
	}
	return &Repo[T]{
		coll:      db.Collection(cfg.Collection),
		field:     field,
		revField:  rev,
		current:   cfg.Current,
		oldest:    oldest,
		implicit:  implicit,
		steps:     steps,
		writeBack: !cfg.NoWriteBack,
	}, nil
}
