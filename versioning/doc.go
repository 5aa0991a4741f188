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
// field is at Config.Implicit (1 by default): the documents written before
// versioning was adopted.
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
// by default). Update is filtered on the current version, so an update
// written against T never lands on an older shape: an older document is
// migrated first. The revision is what makes the write-back safe against
// writers that keep the version, such as the previous release during a
// rolling deploy: see [Repo] for exactly what is protected.
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
// # Failures
//
// A migration that fails, a version no migration starts from, a version
// field that is not an integer, or a migrated document that does not fit T
// is an [ErrMigration] (a [*MigrationError] naming the versions for a
// failing step); the stored document is untouched, and Get returns the
// error wrapped with the collection and the id.
//
// # Servers
//
// Everything works on MongoDB 6.0+ and on FerretDB 1.x, except Update
// with an aggregation pipeline, which needs
// [patterns.FeaturePipelineUpdates] and returns [patterns.ErrUnsupported]
// without it. On FerretDB, MigrateAll writes one replaceOne per document
// instead of bulk writes (see [Repo.MigrateAll]), and every write filtered
// on more than the _id (write-backs, Update, Replace) scans the
// collection, since FerretDB 1.x pushes down only a filter on _id alone.
package versioning
