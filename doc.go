// Package mongopatterns turns MongoDB's schema-design patterns into typed,
// tested, generic repositories, built on go.mongodb.org/mongo-driver/v2.
// This package holds only documentation; the code lives in one package per
// pattern, plus what they share:
//
//   - [github.com/mongopatterns/mongopatterns/subset]: a parent embeds its N
//     most relevant children; the full set lives in its own collection.
//   - [github.com/mongopatterns/mongopatterns/extref]: copies of a few fields
//     of a referenced document, kept in sync with their source.
//   - [github.com/mongopatterns/mongopatterns/outlier]: a normal document
//     embeds its array; the rare huge one overflows into extra documents.
//   - [github.com/mongopatterns/mongopatterns/bucket]: time-series points
//     grouped into bucket documents with summaries.
//   - [github.com/mongopatterns/mongopatterns/versioning]: documents carry a
//     schema version and are migrated lazily on read or eagerly in batches.
//   - [github.com/mongopatterns/mongopatterns/patterns]: errors, server
//     capabilities, index declarations and validators shared by them all.
//
// # Embed or reference?
//
// The first question of every MongoDB schema is whether related data lives
// inside one document (embedding: one read, one atomic write) or in
// documents of its own that point at each other (referencing: no size
// limit, each part read and written alone). A guide:
//
//   - One-to-one and one-to-few (a user's two addresses): embed. Nothing
//     here is needed; a plain struct field does it.
//   - Bounded and read together (a product's reviews shown on its page):
//     embed. When only part of it is hot (the 10 newest of thousands of
//     reviews), embed that part and keep the rest referenced: the subset
//     pattern, package subset.
//   - Unbounded, or read on its own (a sensor's readings, an account's
//     log): reference. When the referencing documents need a few fields of
//     the referenced one on every read (an order shows its customer's
//     name), copy those fields in: the extended reference pattern, package
//     extref, which keeps the copies in sync.
//   - Usually few, rarely huge (comments on posts, with the odd viral post):
//     embed for the common case and let the outliers overflow into extra
//     documents: the outlier pattern, package outlier.
//   - Time series (measurements arriving over time): neither one document
//     per point nor one document per series, but one per series and time
//     window: the bucket pattern, package bucket (with a native time-series
//     collection as an alternative backend on MongoDB 5.0+).
//   - Whatever the shape, it will change: the schema versioning pattern,
//     package versioning, lets old and new shapes live side by side and
//     migrates them without downtime.
//
// # Servers
//
// Every operation is written for MongoDB 6.0+ semantics and takes its
// native path there. Repositories detect the server once through
// [github.com/mongopatterns/mongopatterns/patterns.Capabilities] and take
// the native path where it has the feature an operation relies on, a
// documented portable path where it lacks it, or return an error wrapping
// patterns.ErrUnsupported that names the missing feature. They are never
// silently wrong:
//
//   - FerretDB 2.x (PostgreSQL with the DocumentDB extension) gets the
//     native paths of what it was measured to do as MongoDB does ($push
//     modifiers, arrayFilters, pipeline updates, $pull conditions, the
//     16 MiB limit, partial and TTL indexes, $lookup, the $group
//     accumulators, atomic concurrent updates); what it gets silently
//     wrong (transactions, validators given at create, time-series
//     collections, $dateTrunc by day and week) is never used. Its own
//     error codes for a document past 16 MiB and for a PostgreSQL
//     deadlock are read as MongoDB's.
//   - FerretDB 1.x lacks transactions, arrayFilters and TTL indexes,
//     silently ignores the $push modifiers $sort and $slice, and loses
//     concurrent updates to one document unless the client has a single
//     connection: the portable paths.
//   - Servers the library does not recognise are assumed to lack every
//     optional feature.
//
// Each feature, with the quirks of the servers that lack it, is described
// at its patterns.Feature constant.
package mongopatterns
