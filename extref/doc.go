// Package extref keeps extended references in sync with their source.
//
// An extended reference copies the few fields that readers need from a
// referenced document into each document that references it, so that reads
// need no $lookup: an order embeds customer: {id, name, email}, a cart's
// items embed product: {id, name, price}. The copied fields should rarely
// change; when they do, every copy must follow.
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
//     rewrite only the copies that differ, and are safe to run again after
//     any error.
//   - [Ref.Verify] finds copies that drifted from their source (a crash
//     between an update and its sync, writes by other code) and
//     [Ref.Repair] fixes them, in batches, with counts.
//   - [Ref.Watch] syncs from a change stream on the source, resumable from a
//     [TokenStore].
//
// # Servers
//
// On MongoDB 6.0+, Sync sends one updateMany per target (with arrayFilters
// for copies inside arrays), and Update runs in a transaction where the
// deployment has them (a replica set or sharded cluster).
//
// On FerretDB 1.x (no arrayFilters, no positional operator, no $elemMatch
// on element fields, no transactions, no change streams), array targets take
// a portable path (read the documents holding copies, rewrite the stale ones
// by index with a guard on their id, retry the documents whose array moved
// meanwhile, or fail with [patterns.ErrConflict]: never a partial, silent
// update); Update updates then syncs, with the gap documented; Watch returns
// [patterns.ErrUnsupported] naming [patterns.FeatureChangeStreams]. The path
// is chosen once, on first use, from [patterns.Capabilities].
package extref

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "extref"
