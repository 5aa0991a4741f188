// Package subset implements the subset pattern: a parent document (a
// product) embeds only its N most relevant children (its 10 newest
// reviews), so that the common read is one round trip and the working set
// stays small, while every child lives in its own collection (reviews,
// each carrying its product's id), which is the source of truth.
//
// # Usage
//
// The calls a service makes, in order (the Example has them whole):
//
//	reviews, err := subset.New[Product, Review](db, subset.Config{
//		Parents: "products", Field: "reviews", // the embedded subset
//		Items: "reviews", ParentField: "productId", // the full set
//		SortField: "at", Descending: true, Cap: 10,
//	})
//	err = patterns.EnsureIndexes(ctx, reviews.Indexes()...) // once, at start-up
//	err = reviews.Add(ctx, productID, review)                // a new review
//	p, err := reviews.Get(ctx, productID)                     // the page: 1 find
//	items, next, err := reviews.Page(ctx, productID, after, 20) // "all reviews", by keyset
//	err = reviews.Remove(ctx, productID, reviewID)           // the next one moves in
//
// A service depends on [Store], which [*Repo] implements. The sections
// below give the guarantees, then how the repository keeps them.
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
// parent, the subset and its revision (three with Config.CountField, the
// count of all its items, set in the same update as the subset; and on
// the push path the push field, Config.PushedField, see Recomputation),
// and
// [Repo.Delete] deletes a parent with its items.
//
// # Writes
//
// Every write changes the items collection first and the parent second;
// between the two a reader sees the item in the full set but not (yet, or
// still) in the subset, and that is all the lag a reader sees (but for
// the items of an Add whose parent is deleted and created again while it
// runs: see [Repo.Add]): the subset
// a [Repo.Get] returns is the first N items of a linearization of the
// writes, each item taking effect within its call (a reader may see some
// items of an Add of several before the others, since the items
// collection may show them so). Each write is safe to retry after a
// failure at any step, and each of its commands that writes is retried
// after a transient failure (FerretDB 2.x's "deadlock detected", which
// applied nothing, a few times with a short backoff). [Repo.Add] is
// the hot path; the repository takes one of two paths, chosen once from
// the server's features ([patterns.Capabilities]):
//
//   - Push path, on MongoDB 5.2 and later and on FerretDB 2.x: Add sends
//     four commands, a read of the parent (that it exists, before its
//     items are stored: see [Repo.Add]), an
//     unordered insertMany of the items, one update of the parent
//     that pushes them with $each, $sort and $slice, so the server keeps
//     the subset sorted and capped atomically, whatever the order in which
//     items arrive, and a count of the items pushed, which finds one that
//     a concurrent Remove deleted before the push (see [Repo.Add]). The update is guarded by {<subset>.<id>: {$nin: ids}}
//     so that a retry, or a race with a recomputation that already put an
//     item there, never stores an item twice; when the guard matches
//     nothing, Add recomputes the subset (see [Repo.Add]). It needs [patterns.FeaturePushModifiers],
//     [patterns.FeaturePipelineUpdates] and [patterns.FeatureSortArray]
//     (see Recomputation), and [patterns.FeatureUpdateSizeLimit], since
//     only the server knows the size of the parent a push makes.
//   - Portable path, on every other server: the subset is recomputed from
//     the items collection after the insert. "Push, then trim" would let a
//     reader see more than N items where $push ignores $slice (FerretDB
//     1.x); a recomputation never does. A server with the $push
//     modifiers but without $sortArray (MongoDB before 5.2) takes this
//     path too: a push that the recomputations could not merge would make
//     them start again under sustained pushes.
//
// [Repo.Remove], [Repo.Update] and [Repo.Rebuild] recompute on every
// server, which is also how an item that leaves a full subset is replaced
// by the next most relevant one.
//
// # Recomputation
//
// The parent carries a revision counter (Config.RevisionField, by default
// the subset field followed by "Rev") that every recomputation, and
// nothing else, increments. A parent that has none (as the application
// created it), or holds there anything but an
// int64 from 2^32 to 2^62 + 2^32 (null; 0, as a Go int64 field without omitempty
// creates it; a double, as a JavaScript client may write it back), is
// first stamped with a random int64 multiple of 2^32 (up to 2^62), by a
// findAndModify filtered on such a revision that returns the parent (on
// the push path it sets the push field to a new ObjectID too, see below): one
// command more, once per parent, sent by the first recomputation or the
// first [Repo.Add], which stamps the parent it reads before storing its
// items. A parent type that maps the field must
// map it as an int64 (an int32 cannot hold a stamp), and an application
// that creates a parent again from a copy of a deleted one must leave
// the field out (or null): with the deleted parent's stamp it is the
// same incarnation to a compare-and-set. The field is the repository's:
// another writer that rewrites it while a call is in flight (a
// JavaScript client writing it back as a double, or a copy replacing the
// parent whole) makes the parent look created again, and an Add in
// flight then takes its items back and runs again on it (see
// [Repo.Add]), which may replace the version another call stored
// meanwhile, or store again an item another call removed meanwhile.
// Write a parent's own fields with update operators ($set), never by
// replacing it whole. So the
// revision names the parent's incarnation, and a compare-and-set never
// matches a parent deleted and created again since it was read (a filter
// on the revision's absence would, and write into the new parent the
// items of the deleted one). An Add's push is bound to the incarnation
// it read too (its filter holds the revision between the stamp and the
// next multiple of 2^32, which recomputations never reach), so that an
// Add never stores its items in a parent it did not find (see
// [Repo.Add]); after a push that landed, the count that checks it may
// recompute the parent it then finds, as a Rebuild would. An int64 the
// application writes there from 2^32 is taken for a stamp: a revision
// near the end of its range is carried into the next by a
// recomputation, which an Add in flight takes for a parent created
// again. Create parents without a revision. A recomputation reads the revision r and the
// subset's ids S, reads the first N items T from the items collection with
// one indexed find, and writes the subset with a compare-and-set: an
// update filtered on {_id, rev: r} that also increments rev. If another
// recomputation got there first, the update matches nothing and the
// recomputation reads the parent again.
//
// On the portable path the update sets the subset to T. On the push path,
// where pushes do not move the revision, the update is a pipeline that
// merges server-side: the new subset is the first N, sorted with
// $sortArray in the configured order, of T and of the elements of the
// current subset whose id is neither in T nor in S, that is, the
// elements pushed since the parent was read. An element of S that T does
// not hold is dropped (it was removed, changed or outranked); what T holds
// is written as read from the items collection; nothing pushed meanwhile
// and still in the subset is lost.
//
// What a push sorts out of a full subset ($slice) leaves no trace there,
// though: an item inserted after the find of T, which T does not hold,
// may rank in the first N once the merge drops an element of S (issue
// 34: Remove(x) of the first of a full subset read T; an Add of y,
// ranking below the subset but above the item T read to fill x's place,
// inserted y and pushed it out; the merge wrote the subset without y, for
// good). So every push also sets the parent's push field
// (Config.PushedField) to a new ObjectID, which the recomputation reads
// with S, and its compare-and-set also requires that field as read, or a
// subset that is not full (then no push sorted anything out; a push that
// left it full fails it, whether or not it sorted anything out). When a
// push made it fail (the revision is the one it read), the recomputation
// announces itself: its next read is a findAndModify that sets the push
// field to true, and every push is guarded by that field not being true,
// so that none lands until a compare-and-set, which sets the field to a
// new ObjectID (an Add whose push matches nothing recomputes instead,
// see [Repo.Add]).
// The announcement is bound to the incarnation recomputed, so that a
// parent deleted and created again gets none (the recomputation then
// reads it, one command more). So a push makes a recomputation start
// again once at most, and
// otherwise the compare-and-set fails only when another recomputation
// won. An announcement no compare-and-set follows (a call that returns
// after the read, or is cut short) holds pushes off until the next
// recomputation of the parent: the next Add's.
//
// That bounds every recomputation, however many writers compete and
// however many items arrive. Let f be the first revision read after the
// caller's change to the items (a delete, a replace). The recomputation
// that writes f+2 compared against f+1, which was written after f was
// read, so it read the parent, and then the items, after the change; what
// it wrote reflects the change. So the caller stops as soon as it reads a
// revision of f+2 or more: [Repo.Remove], [Repo.Update] and [Repo.Rebuild]
// send at most two compare-and-sets, and a portable Add (whose first read
// comes before its insert) at most three; on the push path one more when
// a push in the window of one left the subset full (and the announcing
// read, one command): so do a Remove, an Update, a Rebuild and the
// recomputation of an Add whose push matched nothing. The argument needs
// every write
// to the subset to be a recomputation or a push, which holds as long as
// every repository over the same collections has the same Config: the
// path follows the server.
//
// # Size
//
// A parent holds at most 16 MiB ([patterns.MaxDocumentSize]). An item is
// refused with [patterns.ErrTooLarge] when Cap items of its size would not
// fit in a parent holding nothing else (see [Config].Cap). A parent whose
// own fields leave too little room for its subset is refused by the
// server, whose error every operation returns wrapping
// [patterns.ErrTooLarge]; on a server that would store it (without
// [patterns.FeatureUpdateSizeLimit]: FerretDB 1.x) a recomputation reads
// the whole parent, rather than its revision and subset ids, and measures
// what it would write: a read of the parent's size in bytes, once per
// attempt, instead of a few bytes. (Another write to the parent's other
// fields between that read and the write is not seen.) [Repo.Add] then
// deletes the items it stored; [Repo.Update] keeps the new version in the
// items collection and the old one in the subset, as [Repo.Remove] and
// [Repo.Rebuild] keep the subset, until the parent has room.
//
// # Costs
//
// In round trips: [Repo.Get] 1; [Repo.Add] 4 on either path;
// [Repo.Remove] and [Repo.Update] 4; [Repo.Rebuild] 3; [Repo.Page],
// [Repo.Item] and [Repo.Count] 1; [Repo.All] 1 per page of items (see its
// godoc). A lost race adds 3 to a recomputation (at most once after a
// fresh read, see above); on the push path a compare-and-set that a push
// made fail (one that left the subset full, see Recomputation) adds 4,
// at most once: the read, the announcing findAndModify, the find and the
// compare-and-set again; the first Add or recomputation of a parent
// without a revision adds its stamp, 1 (see Recomputation), or 2 more
// when another call stamps the parent between its read and its stamp
// (the stamp that matches nothing, and a read again). With Config.CountField, every recomputation
// counts the parent's items (one aggregate more, which reads the parent's entries of
// the index) and every Add takes the portable path, 5 round trips: a
// count kept by increments would be applied twice by a retry, or by a
// recomputation that counted the items a push then added again. On
// FerretDB, which sorts in memory, a recomputation reads all of a parent's
// items to find the first N.
//
// # Concurrency
//
// A [Repo] is safe for concurrent use by several goroutines and by
// several processes: the subset is never larger than N, never holds an
// item twice, and is the first N items once the writes end. On FerretDB
// 1.x this holds only for one client with one connection
// (options.Client().SetMaxPoolSize(1)), since that server loses concurrent
// updates of one document: see [patterns.FeatureConcurrentUpdates].
//
// # Input
//
// Ids are any scalar BSON value but a deprecated symbol and are checked
// with [patterns.ValidateID]; documents are rejected so that an id taken from a
// request cannot carry query operators. Ids are compared as the server
// compares them: 7, int64(7) and 7.0 are one id. Bad configuration and
// bad input give errors wrapping [patterns.ErrInvalid], and nothing is
// written. Every error reads "subset: <Operation>: <what>: <cause>".
//
// # Sharding
//
// Shard the parents on {_id: "hashed"}: every write the repository sends
// to a parent names its _id, so each goes to one shard, and a hashed key
// spreads parents whose ids grow with time (ObjectIDs) instead of sending
// every new parent to the last chunk. Shard the items on {<ParentField>:
// "hashed", <IDField>: 1} ({parent: "hashed", _id: 1} by default): an
// Add of one item, Update's replacement and Remove's delete name both
// fields and go to one shard (the count of the items an Add pushed names
// the parent and their ids: one shard per item at most); the insert of an Add of several items, the
// recomputation's read, [Repo.All], [Repo.Page] and [Repo.Delete]'s
// deleteMany name the parent, a prefix of the key, and go to the shards
// owning that parent's chunks (one, until its items outgrow
// a chunk: the second field lets a parent with millions of items split,
// where {<ParentField>: "hashed"} alone would make it a jumbo chunk). When
// IDField is not _id, the unique {<ParentField>: 1, <IDField>: 1} index
// must be prefixed by the shard key, which this key is; any other key
// refuses it (67, CannotCreateIndex). [Repo.RebuildAll] pages through every
// parent and goes to every shard, and so does the read of Add, by _id
// alone, of ids another parent holds, which it sends only when its insert
// found an id taken that the parent's items did not hold, twice (see
// [Repo.Add]).
//
// Items on {_id: "hashed"}, with IDField _id (the default): the writes by
// item _id stay on one shard, but every read by parent and [Repo.Delete]
// go to every shard, and an Add of several items sends one insert that
// mongos splits between shards. No command the repository sends is
// refused on MongoDB 6.0 or later under either key. With IDField other
// than _id, never shard the items on {_id: "hashed"}: mongos refuses the
// unique {<ParentField>: 1, <IDField>: 1} index of [Repo.Indexes] (67),
// and Remove's delete and Update's replacement name the item by
// {<ParentField>, <IDField>}, with no _id: on 6.0, 7.0, and 7.1 or 8.0 at
// FCV 7.0, Remove is refused (61) and Update's replacement is targeted at
// the chunk of hash(null), where it keeps the matched item's _id and so
// changes no shard key, and matches nothing unless that shard holds the
// item ([patterns.ErrNotFound] for an item stored elsewhere); at FCV 7.1
// or later both are two-phase writes to every shard.
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
//
// # Observing
//
// With Config.Hook set, every method that may send a command reports to
// the [patterns.Hook] as one operation ([Repo.All]: each iteration): its
// start, with the collections and the plan (push or portable, as
// "native" or "portable", and the features it relies on); each write
// sent again after a transient failure; each lost compare-and-set of a
// recomputation (a concurrent recomputation moved the revision, or
// deleted the parent) and the count that [Repo.Count] set and found
// removed (its ErrConflict); and its
// end, with the commands it sent (getMores and killCursors included),
// the documents it wrote as the server reports them, and its error. Its
// commands use the context the hook returns. Nothing more is sent:
// the counts of commands above hold with a hook. A nil Hook reports
// nothing and costs nothing (no allocation).
package subset

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "subset"
