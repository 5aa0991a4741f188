// Package extref keeps extended references in sync with their source.
//
// An extended reference copies the few fields that readers need from a
// referenced document into each document that references it, so that reads
// need no $lookup: an order embeds customer: {id, name, email}, a cart's
// items embed product: {id, name, price}. The copied fields should rarely
// change; when they do, every copy must follow.
//
// # Usage
//
// The calls a service makes, in order (the Example has them whole):
//
//	customers, err := extref.New[CustomerRef](db, extref.Config{
//		Source:  "customers",
//		Targets: []extref.Target{{Collection: "orders", Path: "customer"}},
//	})
//	err = patterns.EnsureIndexes(ctx, customers.Indexes()...) // once, at start-up
//	ref, err := customers.Of(ctx, customerID)                   // the copy to embed in a new order
//	counts, err := customers.Update(ctx, customerID, update)    // change the source and every copy
//	reports, err := customers.Verify(ctx)                       // find stale copies; Repair mends them
//
// A service depends on [Store], which [*Ref] implements. The sections
// below give the guarantees, then how the repository keeps them.
//
// # Declaring a reference
//
// The copy is a Go struct holding the source's id and the copied fields, by
// their BSON names; the targets say where copies live:
//
//	type CustomerRef struct {
//		ID    bson.ObjectID `bson:"id"`
//		Name  string        `bson:"name"`
//		Email string        `bson:"email"`
//	}
//
//	customers, err := extref.New[CustomerRef](db, extref.Config{
//		Source: "customers",
//		Targets: []extref.Target{
//			{Collection: "orders", Path: "customer"},          // one copy per order
//			{Collection: "routes", Path: "stops[].customer"}, // a copy in each stop
//		},
//	})
//	err = patterns.EnsureIndexes(ctx, customers.Indexes()...)
//
// # Using it
//
//   - [Ref.Of] returns the copy to embed when a referencing document is
//     created.
//   - [Ref.Update] changes the source and its copies; [Ref.Sync] pushes a
//     source's current fields to its copies after any other change. Both
//     rewrite only the documents whose copies differ. Sync is safe to run
//     again after any error; an Update that failed after changing the
//     source says so ([ErrNotSynced]), and Sync is its retry.
//   - [Ref.Verify] finds copies that drifted from their source (a crash
//     between an update and its sync, writes by other code) and
//     [Ref.Repair] fixes them, in batches, with counts and the ids of the
//     first stale and orphan copies ([Report]).
//   - [Ref.Watch] syncs from a change stream on the source, resumable from a
//     [TokenStore].
//
// # Costs
//
// [Ref.Of] sends one find. [Ref.Sync] sends one find of the source and one
// updateMany per target, plus one find that confirms the source did not
// change while it wrote, when it rewrote anything (see [Ref.Sync] for why).
// [Ref.Update] replaces the first find by the source's findAndModify
// (with [Config.ShardKey], a find of the key's values precedes it: see
// Sharding).
// [Ref.Verify] reads each target in pages of [Config.BatchSize] documents
// in _id order (one find each, so that every document is counted once
// while others write, and one more after the last page unless it is the
// first: see [Ref.Verify]), with one find of their sources per page;
// [Ref.Repair] adds a Sync per source with stale copies.
//
// # Observing
//
// [Config.Hook], when set, sees every operation of a [Ref] that may send
// a command (Of, OfMany, Sync, Update, Verify, Repair, Watch) start and
// end, through [patterns.Hook], with the ctx its commands use: the
// repository's collections (the source's, then the targets', each
// once), its plan (native or portable, and the features it relies on),
// the commands it sent, the transient failures it sent again, its lost
// compare-and-sets (a guarded copy of the portable path that another
// writer changed between read and write, a source that changed while
// Sync wrote its copies, a shard-key read that Update's findAndModify no
// longer matched: each read and written again, up to the bound the
// method gives), the documents written (Sync, Update, Repair: the source
// updated and the copies rewritten), and the outcome; an Update that
// returns [ErrNotSynced] is marked [patterns.Operation].Partial. The
// commands and documents of a sync that concurrent calls share (see
// [Ref.Sync]) count in the operation that ran it. Watch is one operation
// until it returns, with each event's sync, and the Repair after a lost
// history, nested in it as operations named Sync and Repair. The
// commands of a [TokenStore] other than [TokenCollection] are not
// counted. A nil Hook costs nothing, and a hook sends nothing more: the
// costs above hold either way. Verify and Repair report their progress
// to [ScanOptions].Progress.
//
// # Concurrency
//
// A [Ref] is safe for concurrent use, and several processes may sync the
// same sources at once: each method says what concurrent readers and
// writers see, and concurrent Syncs and Updates of one source leave its
// copies equal to it once all have returned nil (a source deleted while
// one of them writes makes that one return an error wrapping
// [patterns.ErrNotFound]: the copies may then hold a value older than the
// source's last). Concurrent Syncs and
// Updates of one source through one Ref share their syncs instead of
// fighting over the same target documents (see [Ref.Sync]). On FerretDB
// 1.x this holds only for one client with a single connection: see
// [patterns.FeatureConcurrentUpdates].
//
// # Servers
//
// The path is chosen once, on first use, from the server's features
// ([patterns.Capabilities]).
//
// On MongoDB 6.0+, Sync sends one updateMany per target (with arrayFilters
// for copies inside arrays), and Update runs in a transaction where the
// deployment has them (a replica set or sharded cluster); Watch follows a
// change stream.
//
// FerretDB 2.x has arrayFilters, so Sync takes the same path as on
// MongoDB; it has neither working transactions nor change streams, so
// Update updates then syncs, with the gap documented, and Watch returns an
// [*patterns.UnsupportedError] naming [patterns.FeatureChangeStreams].
//
// FerretDB 1.x has none of them (no arrayFilters, no $elemMatch on element
// fields, no transactions, no change streams, no multi-statement updates
// of a hundred statements or more: [patterns.FeatureBatchedUpdates]). Array
// targets take a portable path there: read the documents holding copies,
// rewrite the stale ones by index with a guard on their value as read,
// one document per update command, retry the documents whose array
// changed meanwhile, or fail with [patterns.ErrConflict]: never a
// partial, silent update. Update
// refuses a pipeline or an arrayFilters option with an
// [*patterns.UnsupportedError] naming the feature, before sending anything.
//
// # Sharding
//
// Shard the source on {_id: "hashed"}: [Ref.Of], [Ref.Sync] and
// [Ref.Update] address a source by _id alone, so each goes to one shard.
// [Ref.Verify] reads the sources of a batch of copies by an $in of their
// ids: some shards.
//
// A source sharded on another key ({region: 1, _id: 1}, say) must name
// that key's fields in [Config.ShardKey]. Without it, Update's
// findAndModify by _id is refused by MongoDB 6.0 and 7.0, and by a 7.1
// or 8.0 cluster whose featureCompatibilityVersion is still 7.0 (61,
// ShardKeyNotFound: "Query for sharded findAndModify must contain the
// shard key"); from 7.1 at FCV 7.1 or later mongos accepts it as a
// two-phase write to every shard. With it, Update reads the key's values by _id first (a find
// that goes to every shard), then sends its findAndModify with the _id
// and those values by equality: one shard, at 6.0 as at 8.0, for one
// round trip more. It reads first on every mongos, 7.1+ at FCV 7.1+
// included: no server reports [patterns.FeatureWritesWithoutShardKey],
// since a mongos answers getParameter featureCompatibilityVersion with
// its binary version, not the cluster's FCV (SERVER-100224), and the read
// works on every version. Under such a key every read of a
// source by _id (Of, OfMany, Sync's reads, Verify's $in) goes to every
// shard: the repository knows only the ids its callers give. Update
// refuses the upsert option with Config.ShardKey (an upsert's filter must
// hold the key's values of a source that does not exist yet).
//
// The targets are the application's collections. A target holding one
// copy per document is best sharded on the copy's id ({customer.id:
// "hashed"}): Sync's updateMany then goes to one shard. Under any other key,
// and for a copy inside an array (which cannot be a shard key), Sync's
// updateMany goes to every shard; it is idempotent, so a chunk migration
// that makes it miss a document is caught by the next Sync or Repair.
// Verify and Repair page through every target on _id: every shard. No
// command is refused under any target key: the repository never upserts
// into a target nor changes its shard key.
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
package extref

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "extref"
