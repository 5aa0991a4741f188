// Package subset implements the subset pattern: a parent document (a
// product) embeds only its N most relevant children (its 10 newest
// reviews), so that the common read is one round trip and the working set
// stays small, while every child lives in its own collection (reviews,
// each carrying its product's id), which is the source of truth.
//
// A [Repo] is configured with a [Config]: the parents and the field that
// holds the subset, the items and the field that holds the parent id, the
// item id, the cap N and the order that defines "most relevant" (a sort
// field and a direction, ties broken by the item id in the same
// direction). That one order is used everywhere: to keep the subset, to
// list the full set ([Repo.All]), to paginate it by keyset ([Repo.Page],
// [Cursor]) and in the index that serves them all ([Repo.Indexes]). So the
// subset is, whenever no write is in flight, exactly the first N items
// that [Repo.All] yields.
//
// The application creates its parents as it likes (with the subset field
// absent or an empty array); the repository writes only two fields of a
// parent, the subset and its revision, and [Repo.Delete] deletes a parent
// with its items.
//
// # Writes
//
// Every write changes the items collection first and the parent second;
// between the two a reader sees the item in the full set but not (yet, or
// still) in the subset. Each write is safe to retry after a failure at any
// step. [Repo.Add] is the hot path:
//
//   - Native path, on MongoDB: two commands. An unordered insertMany of
//     the items, then one update of the parent that pushes them with
//     $each, $sort and $slice, so the server keeps the subset sorted and
//     capped atomically, whatever the order in which items arrive. The
//     update is guarded by {<subset>.<id>: {$nin: ids}} so that a retry, or
//     a race with a recomputation that already put an item there, never
//     stores an item twice; when the guard matches nothing, Add reads the
//     subset's ids and pushes only the absent items.
//   - Portable path, on servers whose $push silently ignores $sort and
//     $slice (FerretDB 1.x, detected with [patterns.Capabilities]): the
//     subset is recomputed from the items collection after the insert.
//     "Push, then trim" would let a reader see more than N items; a
//     recomputation never does.
//
// [Repo.Remove], [Repo.Update] and [Repo.Rebuild] recompute on every
// server, which is also how an item that leaves a full subset is replaced
// by the next most relevant one.
//
// # Recomputation
//
// The parent carries a revision counter (Config.RevisionField, by default
// the subset field followed by "Rev") that every write to the subset
// increments, pushes included. A recomputation reads the revision, reads
// the first N items from the items collection with one indexed find, and
// sets the subset with a compare-and-set: an update filtered on {_id, rev}
// that also increments rev. If another writer got there first, the update
// matches nothing and the recomputation starts again from a fresh read, so
// a subset computed from a stale view of the items is never written. On
// the portable path the retries are bounded without giving up: once the
// revision has moved two past the first one read after a writer's change,
// a recomputation that saw the change has succeeded, and the writer stops.
// (That holds because on the portable path every write to a subset is a
// recomputation; every repository over the same collections takes the
// same path, since the path follows the server.)
// On the native path pushes move the revision too, and a recomputation
// gives up with [patterns.ErrConflict] after 10 lost races (the items
// collection is right; the caller retries or calls [Repo.Rebuild]).
//
// # Costs
//
// In round trips: [Repo.Get] 1; [Repo.Add] 2 native, 4 portable;
// [Repo.Remove] and [Repo.Update] 4; [Repo.Rebuild] 3; [Repo.Page] 1;
// [Repo.All] 1 per batch. A lost race adds 3 to a recomputation. Only
// Add depends on an optional server feature (the $push modifiers); the
// rest takes the same path everywhere. On FerretDB, which sorts in memory,
// a recomputation reads all of a parent's items to find the first N.
//
// # Input
//
// Ids are any scalar BSON value and are checked with
// [patterns.ValidateID]; documents are rejected so that an id taken from a
// request cannot carry query operators. Bad configuration and bad input
// give errors wrapping [patterns.ErrInvalid], and nothing is written.
package subset
