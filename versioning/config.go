package versioning

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Defaults of [Config] and [MigrateOptions].
const (
	// DefaultVersionField is the field that holds a document's schema
	// version.
	DefaultVersionField = "schemaVersion"
	// DefaultRevisionField is the field that holds a document's revision:
	// a new ObjectID at every write through a [Repo].
	DefaultRevisionField = "_rev"
	// DefaultImplicit is the version of a document without the version
	// field: one written before versioning was adopted.
	DefaultImplicit = 1
	// DefaultBatchSize is the number of documents [Repo.MigrateAll] reads
	// and writes per round trip.
	DefaultBatchSize = 500
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
// above the implicit version, Migrations are required; the other fields
// have working zero values.
type Config struct {
	// Collection holds the documents.
	Collection string

	// Current is the version of the shape T: the version every write
	// stamps and every read returns. From 1 to MaxInt32.
	Current int

	// Migrations form a chain without gaps from the oldest version this
	// code reads to Current: one migration for each From in
	// oldest..Current-1, in any order. With none, Current is the only
	// version read.
	Migrations []Migration

	// VersionField holds the schema version in each document, as an
	// integer; empty means [DefaultVersionField].
	VersionField string

	// RevisionField holds the document's revision, a new ObjectID at
	// every write through a Repo; the write-back of a migrated document is
	// conditional on it (see [Repo]). Empty means [DefaultRevisionField].
	RevisionField string

	// Implicit is the version of a document that lacks VersionField
	// (documents written before versioning was adopted); 0 means
	// [DefaultImplicit]. It must be a version this code reads: between
	// the oldest migration and Current.
	Implicit int

	// NoWriteBack turns off the write-back of documents migrated by Get
	// and Find, which then only read (for read-only credentials or
	// secondaries). Update, MigrateAll and Replace still write.
	NoWriteBack bool

	// ShardKey names the fields of the collection's shard key (paths, as
	// given to shardCollection) when the collection is sharded on
	// anything but _id alone: every write that follows a read of the
	// document then carries their values as read, by equality, so that a
	// sharded cluster sends it to one shard (see "Sharding" in the package
	// documentation). Empty, the default, adds nothing: right for a
	// collection that is not sharded or is sharded on _id. _id, the
	// version and the revision fields (which every write changes), and a
	// field given twice, are refused.
	ShardKey []string

	// Hook, when set, observes every operation of the repository (see
	// [patterns.Hook]); nil reports nothing and costs nothing.
	Hook patterns.Hook
}

// normalize returns c with its defaults filled in and its migrations
// sorted by From (a copy: the caller's slice is left alone), or an error
// wrapping patterns.ErrInvalid naming what is wrong.
func (c Config) normalize() (Config, error) {
	if err := check.Collection(c.Collection); err != nil {
		return c, err
	}
	c.VersionField = cmp.Or(c.VersionField, DefaultVersionField)
	c.RevisionField = cmp.Or(c.RevisionField, DefaultRevisionField)
	c.Implicit = cmp.Or(c.Implicit, DefaultImplicit)
	for _, f := range []struct{ what, name string }{{"VersionField", c.VersionField}, {"RevisionField", c.RevisionField}} {
		if err := check.Field(f.name); err != nil {
			return c, fmt.Errorf("%s: %w", f.what, err)
		}
		if f.name == "_id" {
			return c, errs.Invalid("%s: %q is the document id", f.what, f.name)
		}
	}
	if c.VersionField == c.RevisionField {
		return c, errs.Invalid("VersionField and RevisionField are both %q", c.VersionField)
	}
	if err := shard.CheckFields(c.ShardKey); err != nil {
		return c, fmt.Errorf("ShardKey: %w", err)
	}
	for _, f := range c.ShardKey {
		if root, _, _ := strings.Cut(f, "."); root == c.VersionField || root == c.RevisionField {
			return c, errs.Invalid("ShardKey: %q: every write changes the version and the revision; shard on other fields", f)
		}
	}
	c.ShardKey = slices.Clone(c.ShardKey)
	if c.Current < 1 || c.Current > math.MaxInt32 {
		return c, errs.Invalid("Current is %d: want a version from 1 to %d", c.Current, math.MaxInt32)
	}

	c.Migrations = slices.SortedFunc(slices.Values(c.Migrations), func(a, b Migration) int { return cmp.Compare(a.From, b.From) })
	oldest := c.oldest()
	if oldest < 1 {
		return c, errs.Invalid("a migration from version %d: versions start at 1", oldest)
	}
	for i, m := range c.Migrations {
		switch want := oldest + i; {
		case m.Up == nil:
			return c, errs.Invalid("the migration from version %d has no Up function", m.From)
		case m.From >= c.Current:
			return c, errs.Invalid("a migration from version %d, but Current is %d", m.From, c.Current)
		case m.From < want:
			return c, errs.Invalid("two migrations from version %d", m.From)
		case m.From > want:
			return c, errs.Invalid("no migration from version %d: the chain from %d to %d has a gap", want, oldest, c.Current)
		}
	}
	if n := len(c.Migrations); n > 0 && c.Migrations[n-1].From != c.Current-1 {
		return c, errs.Invalid("no migration from version %d: the chain from %d must reach Current %d", c.Migrations[n-1].From+1, oldest, c.Current)
	}
	if c.Implicit < oldest || c.Implicit > c.Current {
		return c, errs.Invalid("Implicit is version %d: documents without %q must be at a version this code reads, %d to %d (set Implicit)", c.Implicit, c.VersionField, oldest, c.Current)
	}
	return c, nil
}

// oldest is the oldest version the chain reads: the first migration's,
// or Current without migrations. The migrations must be sorted.
func (c Config) oldest() int {
	if len(c.Migrations) > 0 {
		return c.Migrations[0].From
	}
	return c.Current
}
