// Package versioning implements the schema versioning pattern: every
// document carries a schema version, code reads every version it knows,
// upgrades old documents as it meets them, and writes only the current
// shape. A schema changes with no downtime and no big-bang migration.
//
// # Usage
//
// The calls a service makes, in order (the Example has them whole):
//
//	orders, err := versioning.New[Order](db, versioning.Config{
//		Collection: "orders", Current: 2,
//		Migrations: []versioning.Migration{{From: 1, Up: totalToCents}},
//	})
//	err = patterns.EnsureIndexes(ctx, orders.Indexes()...) // once, at start-up
//	o, err := orders.Get(ctx, id)          // any version in, the current shape out (written back)
//	id, err := orders.Insert(ctx, order)   // stamped with the current version
//	res, err := orders.MigrateAll(ctx, versioning.MigrateOptions{}) // the rest, in batches
//
// A service depends on [Store], which [*Repo] implements. The sections
// below give the migration chain, the guarantees, then how reads and
// writes keep them.
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
// [Repo.Validator] checks T at the current version only, so both run under validationAction "error".
//
// # Observing
//
// [Config.Hook], when set, sees every operation of a [Repo] that may send
// a command (Get, Find, Insert, Replace, Update, Delete, MigrateAll,
// Stats) start and end, through [patterns.Hook], with the ctx its
// commands use: the collection, the plan (native or portable, and the
// features it relies on), the commands sent, the transient failures sent
// again, the lost compare-and-sets (a write-back, a guarded replacement
// or findAndModify that another writer's revision beat, after which the
// operation reads the document again), the documents written (Insert,
// Replace, Update and Delete: one; Get and Find: those written back;
// MigrateAll: those migrated), and the outcome. A Find reports one
// operation per iteration, from its start to its end, with the last
// error it yielded. A nil Hook costs nothing, and nothing more is sent
// either way: the costs each method gives hold.
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
// # Sharding
//
// A repository uses one collection. Shard it on {_id: "hashed"}: every
// operation that names a document (Get, Insert, Replace, Update, Delete,
// the write-backs and MigrateAll's writes) carries its _id by equality
// and goes to one shard; the hash spreads ObjectIDs, which grow with
// time, over every shard instead of the last chunk; and the unique index
// on _id stays unique across the cluster, which it is on no other key.
// The version index of [Repo.Indexes] is not unique and suits any key.
// What goes to every shard under that key: Find (its filter does not hold
// _id by equality: each page is a find on every shard, merged by _id),
// MigrateAll's pages (the same, filtered on the version; its writes are
// targeted), Stats (an aggregation of every shard) and Progress's count.
//
// Under another shard key (a collection sharded on {tenant: 1, _id: 1},
// say), a command that holds only the _id is not refused by MongoDB 6.0
// and later, since every single-document update and delete of the
// package holds an exact _id: it is sent to every shard (each write a
// message to every shard, the one holding the document applies it). A
// findAndModify, which the package sends only on a server without the 16
// MiB limit on updates ([patterns.FeatureUpdateSizeLimit]; never on
// MongoDB), needs the shard key up to MongoDB 7.0: code 61
// (ShardKeyNotFound, "Query for sharded findAndModify must contain the
// shard key"); from 7.1 the server routes it without. Name the shard
// key's fields in Config.ShardKey: every write that follows a read of the
// document (the write-backs, MigrateAll's writes, Update's write-back and
// the update after it, its findAndModify, the put-back of an oversized
// update) then carries their values as read, by equality, and goes to one
// shard. Replace reads the document first under Config.ShardKey (a find
// by _id, to every shard), and its replacement keeps the stored values of
// the key's fields that T lacks: mongos targets a replacement by the key
// it holds (a missing field as null), so that a T without the key's
// fields would otherwise match nothing or be refused (31025), on every
// version from 6.0 to 8.0. Insert goes to one shard by the values in the
// document. Get, Delete and Update of a document at the current version
// send no read first, so they hold the _id alone: an exact _id, which
// 6.0, 7.0 and a 7.1 or 8.0 cluster whose featureCompatibilityVersion is
// still 7.0 send to every shard, and 7.1 and 8.0 at their own FCV route by
// a two-phase write (every shard too). An exact _id is one with the
// simple collation: Update refuses a collation option other than
// {locale: "simple"} ([patterns.ErrInvalid]), under which a string _id is
// no exact _id (it may match another document's, and MongoDB refuses it,
// 72, under such a key before 7.1 or below FCV 7.1). A migration must
// not change a shard-key
// field: the write-back would move the document to another shard, which
// MongoDB refuses outside a retryable write or a transaction (code
// 31025, or 20 and 72). Never shard on the version or the revision field,
// which every write changes (Config refuses them in ShardKey).
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
//
// # Sessions and transactions
//
// A context that carries a transaction (mongo.NewSessionContext with a
// session after StartTransaction, or the context of WithTransaction's
// callback) is refused by every operation, with an error wrapping
// [patterns.ErrInvalid], before it sends anything: each operation is its
// own atomic step, or steps with retries of their own, and says what a
// reader sees between them; a transaction would make them one unit that
// a single write conflict aborts. Call them outside the transaction. A
// session without a transaction is joined: every command carries its id.
package versioning

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "versioning"
