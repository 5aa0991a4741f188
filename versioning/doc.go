// Package versioning implements the schema versioning pattern: every
// document carries a schema version, code reads every version it knows,
// upgrades old documents as it meets them, and writes only the current
// shape. A schema changes with no downtime and no big-bang migration.
//
// # The chain
//
// T is the current shape, at version Config.Current. Older documents do
// not decode into T, so each [Migration] rewrites the raw document, a
// [Doc] (a bson.D with Get, Set, Rename and Delete helpers that keep field
// order), from version k to k+1. [New] checks the chain has no gap from
// the oldest version to the current one. A document without the version
// field (Config.VersionField, "schemaVersion" by default) is at
// Config.Implicit (1 by default): the documents written before versioning
// was adopted.
//
//	users, err := versioning.New[User](db, versioning.Config{
//		Collection: "users",
//		Current:    3,
//		Migrations: []versioning.Migration{
//			{From: 1, Up: func(d *versioning.Doc) error { d.Rename("mail", "email"); return nil }},
//			{From: 2, Up: splitName},
//		},
//	})
//
// # Reads migrate lazily
//
// [Repo.Get] and [Repo.Find] decode the stored document, migrate it in
// memory, decode it into T and write it back (unless Config.NoWriteBack)
// with a compare-and-set: a replaceOne filtered on the _id, the version
// and the revision that were read. A lost race re-reads. A current
// document costs one command.
//
// # Writes stamp the current version
//
// [Repo.Insert], [Repo.Replace] and [Repo.Update] stamp the current
// version and a new revision (an ObjectID in Config.RevisionField, "_rev"
// by default). Update lands only on the current version, so an update
// written against T never lands on an older shape: an older document is
// migrated first. The revision is what makes the write-back safe against
// writers that keep the version, such as the previous release during a
// rolling deploy: see [Repo] for exactly what is protected. No write ever
// stores a document past 16 MiB ([patterns.ErrTooLarge]), whatever the
// server.
//
// # Newer documents
//
// During a rolling deploy, old code meets documents that new code wrote.
// A document newer than Config.Current gives [ErrNewerSchema] and is
// never migrated, downgraded or overwritten.
//
// # Eager migration
//
// [Repo.MigrateAll] migrates everything below the current version in
// batches, with the same compare-and-set filters, bounded memory and a
// progress callback; it is resumable and safe to run next to live
// traffic. [Repo.Stats] counts documents per version; [Repo.Indexes]
// returns the version index its scan needs.
//
// # Concurrency
//
// A [Repo] is safe for concurrent use by goroutines and by processes
// sharing the collection: every write is guarded by what it read, and
// each guarded write is sent again after a transient failure (FerretDB
// 2.x's "deadlock detected", which applied nothing). On FerretDB 1.x this
// holds only for one client with one connection: see
// [patterns.FeatureConcurrentUpdates].
//
// # Failures
//
// A migration that fails, a version no migration starts from, a version
// field that is not an integer, or a migrated document that does not fit T
// is an [ErrMigration] (a [*MigrationError] naming the versions for a
// failing step); the stored document is untouched. Errors read
//
//	versioning: <Operation>: document <id> of <collection>: <what>: <cause>
//
// for example
//
//	versioning: Get: document "ada" of users: stored at version 4, this code knows up to 3: document schema is newer than this code knows
//
// A failure of the connection, or the end of the context, at any step of
// an operation returns that error (a network error, a timeout), never
// one that claims an outcome ([patterns.ErrNotFound], [ErrNewerSchema],
// [patterns.ErrConflict]), and never a nil error over part of the work.
// Each document stays whole: as it was, or migrated with each step applied
// once, or updated whole; never an update applied to an old shape. Every
// operation is safe to retry after such a failure at any step: Get, Find
// and MigrateAll migrate what is left; a write whose reply was lost may
// have landed, and its retry meets it: Replace replaces again, Insert
// reports a duplicate _id, Delete [patterns.ErrNotFound], and Update
// applies its update once more (see [Repo.Update]).
//
// # Servers
//
// A repository decides once, from the server's features, how it uses the
// server (two commands on first use, once per client):
//   - MongoDB 6.0+ and FerretDB 2.x have every feature the package uses:
//     pipeline updates, arrayFilters, the 16 MiB limit on updates and
//     [patterns.FeatureBatchedUpdates] (MigrateAll writes a batch per
//     command).
//   - FerretDB 1.x and servers the library does not recognise have none:
//     Update with a pipeline or with arrayFilters returns
//     [patterns.ErrUnsupported] naming [patterns.FeaturePipelineUpdates] or
//     [patterns.FeatureArrayFilters]; Update checks the size of its result
//     itself, since the server lacks [patterns.FeatureUpdateSizeLimit]
//     (see [Repo.Update]: one more command); MigrateAll writes one
//     replaceOne per document. On FerretDB 1.x every write filtered on
//     more than the _id (write-backs, Update, Replace, MigrateAll's
//     writes) scans the collection.
package versioning

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "versioning"
