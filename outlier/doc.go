// Package outlier implements the outlier pattern: a parent embeds its
// items in an array up to a cap, and the rare parent that grows past
// it (the viral post among thousands of ordinary ones) keeps its first
// items embedded and overflows the rest into documents of another
// collection. Ordinary parents stay one document and one read; only the
// outliers pay for the second read.
//
// # Usage
//
// The calls a service makes, in order (the Example has them whole):
//
//	posts, err := outlier.New[Post, Comment](db, outlier.Config{
//		Parents: "posts", Field: "comments", Cap: 50,
//	})
//	err = patterns.EnsureIndexes(ctx, posts.Indexes()...) // once, at start-up
//	id, err := posts.Insert(ctx, post)
//	err = posts.Append(ctx, postID, comment)       // one update while the parent has room
//	post, comments, err := posts.Get(ctx, postID)  // one find, two for an outlier
//	page, next, err := posts.Page(ctx, postID, after, 20)
//
// A service depends on [Store], which [*Repo] implements. The sections
// below give the documents it stores, the guarantees, then how the
// repository keeps them.
//
// A parent, a blog post with Config{Field: "comments", Cap: 50}:
//
//	{_id: 7, title: "...", comments: [...up to 50...], has_extra: false, extra_tail: 0}
//
// An outlier, with its overflow documents of Config.OverflowCap items:
//
//	{_id: 7, title: "...", comments: [...50...], has_extra: true, extra_tail: 3}
//	{parent: 7, seq: 0, count: 20, bytes: 4821, items: [...20...]}
//	...
//	{parent: 7, seq: 3, count: 9, bytes: 2170, items: [...9...]}
//
// [Repo.Append] pushes into the parent under an atomic guard on its size
// ({"comments.49": {$exists: false}} for one item, or, once read, the
// count read: {"comments": {$size: n}}) and, once the parent is
// full, into the newest overflow document under a guard on its count and
// bytes, opening the next one by an upsert that the unique {parent, seq}
// index arbitrates. The flag (has_extra, configured in Config.FlagField and
// nowhere else) turns true, before the first overflow document is
// written, exactly when the parent overflows. Items keep their append
// order, each appender's among the others'; Append is retry-safe by item
// id. [Repo.Get] merges the parent and its overflow in one command when the
// flag is false and two when it is true; [Repo.Items] streams a huge
// outlier with bounded memory; [Repo.Page] reads it a page at a time from
// a resumable [Cursor] bound to its parent (one or two commands per page,
// however deep);
// [Repo.Update] edits an item in place wherever it lives; [Repo.Count],
// [Repo.Remove], [Repo.Insert] and [Repo.Delete] complete the repository,
// and [Store] is the interface a service depends on.
//
// # Servers
//
// On MongoDB (6.0 and later) and FerretDB 2.x, Append pushes into an open
// parent in one command, letting the server refuse a parent past 16 MiB,
// and Remove uses $pull by id (in an overflow document, a pipeline update
// that lowers the count by what it pulled). FerretDB 1.x has neither, silently: it
// stores an updated document past 16 MiB ([patterns.FeatureUpdateSizeLimit])
// and reads a $pull condition as an exact element, removing nothing
// ([patterns.FeaturePullConditions]). Where [patterns.Capabilities] cannot
// confirm a feature (FerretDB 1.x, and servers it does not recognise) the
// repository takes the portable way for it, chosen once per repository:
// Append reads the parent first and sizes the push itself, and Remove
// reads the element and pulls it whole. Both keep the guarantees above.
// The portable Append costs a command more to an open parent (2 instead of
// 1) and one less to an overflowed parent (3 instead of 4); the portable
// Remove a command more.
//
// # Failures
//
// An operation that sends several commands may fail between them (a lost
// connection, a timeout). Its error then wraps the driver's
// ([mongo.IsNetworkError] and [mongo.IsTimeout] recognise it), never a
// sentinel of [patterns], and calling it again is safe: Append stores
// each item once, by id (the failed call stored the first of its items,
// in order, and the retry stores the rest after them); Remove and Delete
// report [patterns.ErrNotFound] when the failed call did their work; the
// reads write nothing, and return an error or the whole result (Items
// yields the first items, in order, then the error). Between the failure
// and the retry, readers see the invariants held: the parent at most Cap items, each overflow
// document within OverflowCap and 16 MiB with its count exact, the flag
// true whenever there is overflow (perhaps announcing, with the tail
// hint, a document not yet written), each item stored once, in order.
//
// Every write is also sent again at once after a transient failure that
// applied nothing (FerretDB 2.x's "deadlock detected", through srverr):
// each is guarded by what it changes or idempotent, as each method says.
//
// A Repo is safe for concurrent use by several goroutines and processes.
// On FerretDB 1.x, what the package promises about concurrent writers
// holds only for one client with one connection: see
// [patterns.FeatureConcurrentUpdates].
//
// # Encoding
//
// The repository encodes what it writes, a parent for [Repo.Insert] and
// the items, as bson.Marshal does: with the driver's default registry,
// whatever registry the client or the database given to [New] has. A
// parent id given to a method goes into its filters as given, for the
// driver to encode with the database's registry; item ids are encoded
// with the default one. So an id type that a custom registry encodes
// otherwise (a UUID type as binary subtype 4, where the default registry
// writes subtype 0) is stored by Insert one way and looked for by the
// other methods the other way: give such ids as the BSON value stored (a
// bson.Binary of subtype 4), which every registry encodes alike.
//
// # Indexes
//
// Create [Repo.Indexes] with [patterns.EnsureIndexes] before the first
// write. The unique {parent: 1, seq: 1} index is what makes concurrent
// appenders agree on each overflow document; Append checks once that it
// exists before it overflows a parent.
//
// # Sharding
//
// Shard the parents on {_id: "hashed"}: every command on a parent names
// its _id, so each goes to one shard, and the key spreads parents whose
// ids grow with time. Shard the overflow collection on {parent:
// "hashed"}: the unique {parent: 1, seq: 1} index must be prefixed by the
// shard key (67, CannotCreateIndex, under any key not starting with
// parent), the upsert that opens an overflow document must hold the whole
// key (61 before 7.1 or FCV 7.1), and Remove's $pull by {parent, <item
// id>} must too (72, likewise), as must Update's write of an overflow document (named
// by {parent, seq}); under this key Append, Get, Items, Page, Count,
// Update, Remove and Delete each go to one shard. Its price: an outlier's overflow documents
// share one chunk, which cannot be split (a jumbo chunk past 128 MiB of
// overflow for one parent). Do not shard it on {parent: "hashed", seq: 1}
// to split that chunk: Remove's $pull, which cannot know the seq, names a
// part of the key, and MongoDB 6.0, 7.0, and 7.1 or 8.0 at FCV 7.0 accept
// such a single write only while the parent's chunks sit on one shard: it
// works in testing, and is refused (72) once the balancer spreads them,
// in production. At FCV 7.1 or later it is a two-phase write whose read
// phase goes to the shards of the parent's chunks (its filter's part of
// the key). The portable Remove (servers without
// [patterns.FeaturePullConditions], never MongoDB) pulls from an overflow
// document by its _id: sent to every shard.
//
// On {_id: "hashed"}, the overflow collection refuses the unique index
// (67), so Append refuses to overflow, and on 6.0, 7.0, and 7.1 or 8.0 at
// FCV 7.0, its upserts (61), Update of an overflowed item and Remove (72)
// are refused; at FCV 7.1 or later they are two-phase writes to every
// shard.
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
// the [patterns.Hook] as one operation ([Repo.Items]: each iteration):
// its start, with the collections and the plan ("native" or "portable",
// and the features it relies on); each write sent again after a
// transient failure; each guarded write that matched nothing, after
// which the operation reads again, as a lost compare-and-set: a
// concurrent writer moved what it was guarded on (or, for an Append sent
// again, an earlier attempt stored its items): the misses of Append's
// pushes and closes after its first read of the parent, of Update's
// writes, and of Remove's pull of the elements as read where it pulls
// them whole; and its end, with the commands it sent (getMores
// and killCursors included), the documents it wrote as the server
// reports them, and its error. An Append whose items another call's
// batch wrote (see [Repo.Append]) reports the commands of that batch in
// the operation of the call that wrote it. Its commands use the context
// the hook returns. Nothing more is sent: the costs in commands above
// hold with a hook. A nil Hook reports nothing and costs nothing (no
// allocation).
package outlier

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "outlier"
