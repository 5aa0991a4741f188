package patterns

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"weak"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Feature names a server capability that a repository may depend on. Its
// value is the human-readable name used in [UnsupportedError] and in test
// skips.
type Feature string

// The features that [Capabilities] reports. Each quirk of a server that a
// repository works around is described here, at its feature, once; the
// repositories' documentation links to it.
const (
	// Multi-document transactions (replica sets from MongoDB 4.0, sharded
	// clusters from 4.2; never on a standalone server). FerretDB 2.x
	// answers startTransaction, commitTransaction and abortTransaction with
	// CommandNotFound but applies the writes made "inside" at once, visible
	// to others and kept after an abort: silently wrong, so never reported.
	FeatureTransactions Feature = "transactions"
	// The $push modifiers $sort, $slice and $position. FerretDB 1.x accepts
	// them and silently ignores them, so they must never be assumed.
	FeaturePushModifiers Feature = "$push modifiers ($sort, $slice, $position)"
	// arrayFilters and the filtered positional operator $[<id>] in updates.
	FeatureArrayFilters Feature = "arrayFilters"
	// TTL indexes (expireAfterSeconds).
	FeatureTTLIndexes Feature = "TTL indexes"
	// Partial indexes (partialFilterExpression).
	FeaturePartialIndexes Feature = "partial indexes"
	// $jsonSchema collection validators. FerretDB 2.x silently ignores a
	// validator given at create (collMod applies one, with its own error
	// code and without required, enum, additionalProperties or anyOf).
	FeatureJSONSchema Feature = "$jsonSchema validation"
	// Native time-series collections (MongoDB 5.0+). FerretDB 2.x silently
	// creates a plain collection instead.
	FeatureTimeSeries Feature = "time-series collections"
	// Change streams (replica sets and sharded clusters).
	FeatureChangeStreams Feature = "change streams"
	// The $lookup aggregation stage.
	FeatureLookup Feature = "$lookup"
	// The $group accumulators $min, $max and $avg (FerretDB 1.x has only
	// $sum and $count), as the library uses them: over a field that every
	// document of the group has, and $max of an expression object, which
	// compares objects field by field. Over missing values FerretDB 2.x
	// differs from MongoDB, silently: $min over documents some of which
	// lack the field gives null (MongoDB skips missing and null values),
	// and a field path to a missing field inside an expression object that
	// $max or $first accumulates gives null (MongoDB leaves the field out).
	// So no pipeline of the library groups documents lacking a field with
	// documents that have it, and it tests such a field with {f: null},
	// which matches both; the feature is reported on FerretDB 2.x. The
	// probe ("mongopatterns probe") checks both behaviours apart.
	FeatureGroupMinMaxAvg Feature = "$group accumulators $min/$max/$avg"
	// The $dateTrunc aggregation operator (MongoDB 5.0+). FerretDB 2.x
	// truncates to day and week silently wrong (2026-11-30T12:00Z to day
	// gives 11-26), so it is not reported there.
	FeatureDateTrunc Feature = "$dateTrunc"
	// Updates given as an aggregation pipeline (MongoDB 4.2+).
	FeaturePipelineUpdates Feature = "pipeline-style updates"
	// $pull with a query condition on the elements ({$pull: {a: {k: 1}}}
	// removes every element whose k is 1). FerretDB 1.x compares the
	// condition with whole elements and silently removes nothing.
	FeaturePullConditions Feature = "$pull conditions"
	// The server refuses an update that would make a document larger than
	// 16 MiB. FerretDB 1.x silently stores it.
	FeatureUpdateSizeLimit Feature = "16 MiB limit on updates"
	// A projection (fields) on findAndModify. FerretDB 1.x answers
	// NotImplemented; FerretDB 2.x has it.
	FeatureFindAndModifyProjection Feature = "findAndModify projection"
	// Update commands of several statements with MongoDB's semantics: an
	// unordered command runs every statement and reports each failure at
	// its own index. FerretDB 1.x stops at the first failure, reports it
	// at index 0 whatever its place, fails the whole command on a
	// unique-index violation, holds a connection to its backend per
	// statement until the command ends and stalls on commands of more than
	// about a hundred statements, so that a caller cannot tell which
	// statements ran: repositories send one statement per command there.
	// FerretDB 2.x runs them as MongoDB does.
	FeatureBatchedUpdates Feature = "update commands of several statements"
	// Time-series collections with bucketMaxSpanSeconds and
	// bucketRoundingSeconds (MongoDB 6.3+).
	FeatureTimeSeriesCustomBucketing Feature = "time-series custom bucketing"
	// deleteMany on a time-series collection with a filter on the time
	// field (MongoDB 7.0+; earlier, deletes filter on the meta field only).
	FeatureTimeSeriesDeletes Feature = "time-series deletes by time"
	// Updates of one document that arrive at once on several connections
	// are each applied, as MongoDB's single-document atomicity promises.
	// FerretDB 1.x (either backend) loses them silently: 8 goroutines x
	// 300 $inc on one document applied 378 of 2400, and two processes
	// with one connection each lose updates too. So on FerretDB 1.x every
	// promise a repository makes about concurrent writers holds only for
	// one client with one connection (SetMaxPoolSize(1)); the library's
	// tests and examples connect so there.
	FeatureConcurrentUpdates Feature = "atomic updates from concurrent connections"
	// A createIndexes command naming several indexes. FerretDB 1.x drops
	// the connection when all of them exist already, so [EnsureIndexes]
	// sends one index per command where this is absent. FerretDB 2.x has
	// it.
	FeatureCreateManyIndexes Feature = "createIndexes of several indexes"
	// The $sortArray expression (MongoDB 5.2+), which sorts an array of
	// documents by several fields inside an expression, so that a pipeline
	// update can merge sorted arrays in one atomic write. FerretDB 2.x has
	// it.
	FeatureSortArray Feature = "$sortArray"
	// Collection validators set by collMod and enforced, with the
	// $jsonSchema keywords bsonType (also a list), properties, items,
	// pattern, minimum/maximum, minLength/maxLength and minItems/maxItems,
	// beside the query operators $and, $nor, $exists, $nin, $type and
	// $elemMatch. MongoDB has them from 3.6, with all of $jsonSchema
	// ([FeatureJSONSchema]). FerretDB 2.x has them as measured on
	// 2026-12-01 (refusing a write with code 525074461, not 121), but
	// answers FailedToParse to required, enum, additionalProperties and
	// anyOf, so these are written as query operators beside the
	// $jsonSchema there.
	FeatureValidators Feature = "validators set by collMod"
	// Single writes and findAndModify without the full shard key, on a
	// sharded cluster (mongos 7.1+): an updateOne, replaceOne, deleteOne or
	// findAndModify whose filter lacks the shard key is accepted and routed
	// by a two-phase write (its read phase goes to the shards the filter
	// reaches: every shard for a filter without any of the key), where 6.0 and 7.0 refuse it
	// (61 ShardKeyNotFound, 72 InvalidOptions) unless it is an updateOne or
	// deleteOne by exact _id. The binaries are not enough: the cluster's
	// featureCompatibilityVersion must be 7.1 or later too, and an 8.0
	// cluster still at FCV 7.0 (the usual state during an upgrade) refuses
	// them as 7.0 does. No detection can tell that FCV: a mongos answers
	// getParameter featureCompatibilityVersion with its own binary
	// version, whatever the cluster's FCV (SERVER-100224, COMPASS-10539;
	// an error from 8.3 on). So the feature is absent on every server
	// [NewServer] and [Capabilities] describe, mongos included, and the
	// repositories take the path that works on every version;
	// [Server.WithFCV] records an FCV without granting it. internal/shard
	// applies the same rule to a cluster whose FCV it is given.
	FeatureWritesWithoutShardKey Feature = "writes without the shard key"
)

// AllFeatures returns every [Feature] that [Capabilities] reports, in a
// fixed order.
func AllFeatures() []Feature {
	return []Feature{
		FeatureTransactions, FeaturePushModifiers, FeatureArrayFilters,
		FeatureTTLIndexes, FeaturePartialIndexes, FeatureJSONSchema,
		FeatureTimeSeries, FeatureChangeStreams, FeatureLookup,
		FeatureGroupMinMaxAvg, FeatureDateTrunc, FeaturePipelineUpdates,
		FeaturePullConditions, FeatureUpdateSizeLimit, FeatureFindAndModifyProjection,
		FeatureBatchedUpdates, FeatureTimeSeriesCustomBucketing, FeatureTimeSeriesDeletes,
		FeatureConcurrentUpdates, FeatureCreateManyIndexes, FeatureSortArray,
		FeatureValidators,
		FeatureWritesWithoutShardKey,
	}
}

// ferretDB2 are the features FerretDB 2.x (FerretDB over PostgreSQL with
// Microsoft's DocumentDB extension) was measured to have, exactly as
// MongoDB has them (FerretDB v2.7.0, DocumentDB 0.107, 2026-12-01). The
// features it lacks or gets silently wrong (transactions, validators at
// create, time-series collections, $dateTrunc by day and week) and the one
// it lacks (change streams) are absent.
var ferretDB2 = []Feature{
	FeaturePushModifiers, FeatureArrayFilters, FeatureTTLIndexes,
	FeaturePartialIndexes, FeatureLookup, FeatureGroupMinMaxAvg,
	FeaturePipelineUpdates, FeaturePullConditions, FeatureUpdateSizeLimit,
	FeatureFindAndModifyProjection, FeatureBatchedUpdates,
	FeatureConcurrentUpdates, FeatureCreateManyIndexes, FeatureSortArray,
	FeatureValidators,
}

// Kind says which server implementation answers on the wire.
type Kind int

const (
	// KindOther is a MongoDB-compatible server that is neither MongoDB nor
	// FerretDB (Amazon DocumentDB, Azure Cosmos DB, ...). Every feature it
	// cannot confirm is reported absent.
	KindOther Kind = iota
	// KindMongoDB is MongoDB itself.
	KindMongoDB
	// KindFerretDB is FerretDB: 1.x (recognised by the ferretdbVersion
	// field of buildInfo) or 2.x (by its ferretdb subdocument).
	KindFerretDB
)

// String returns "MongoDB", "FerretDB" or "other".
func (k Kind) String() string {
	switch k {
	case KindMongoDB:
		return "MongoDB"
	case KindFerretDB:
		return "FerretDB"
	default:
		return "other"
	}
}

// Topology is the deployment shape seen by the client.
type Topology int

const (
	// Standalone is a single server that is not part of a replica set.
	Standalone Topology = iota
	// ReplicaSet is a replica set member (hello reports a setName).
	ReplicaSet
	// Sharded is a mongos router (hello reports msg "isdbgrid").
	Sharded
)

// String returns "standalone", "replica set" or "sharded".
func (t Topology) String() string {
	switch t {
	case ReplicaSet:
		return "replica set"
	case Sharded:
		return "sharded"
	default:
		return "standalone"
	}
}

// Version is a server version as reported by buildInfo.
type Version struct {
	Major, Minor, Patch int
	Raw                 string // buildInfo's version string, for example "8.0.4"
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// String returns the raw version string.
func (v Version) String() string { return v.Raw }

// Server describes what a server is and what it can do. Obtain it with
// [Capabilities]; the zero value is a server with no features.
type Server struct {
	Kind     Kind
	Version  Version
	Topology Topology
	// FCV is the featureCompatibilityVersion [Server.WithFCV] recorded;
	// the zero Version otherwise ([Capabilities] never reads it).
	FCV Version
	// FerretDBVersion is FerretDB's own version: buildInfo's
	// ferretdbVersion on FerretDB 1.x ("unknown" when FerretDB is
	// embedded), ferretdb.version on 2.x ("v2.7.0"); empty on other servers.
	// Version holds the MongoDB version FerretDB emulates.
	FerretDBVersion string

	features  map[Feature]bool
	ferretDB1 bool // FerretDB 1.x: buildInfo has ferretdbVersion
}

// Has reports whether the server is known to support f.
func (s *Server) Has(f Feature) bool { return s.features[f] }

// Require returns nil when the server supports f and an [*UnsupportedError]
// naming f and the server otherwise.
func (s *Server) Require(f Feature) error {
	if s.Has(f) {
		return nil
	}
	return &UnsupportedError{Feature: f, Server: s.String()}
}

// Features returns the supported features in the order of [AllFeatures].
func (s *Server) Features() []Feature {
	var out []Feature
	for _, f := range AllFeatures() {
		if s.Has(f) {
			out = append(out, f)
		}
	}
	return out
}

// String describes the server, for example "MongoDB 8.0.4 (replica set)".
// FerretDB is named by its own version, with the MongoDB version it
// emulates as a detail: "FerretDB v2.7.0 (emulates MongoDB 7.0.77,
// standalone)"; an embedded FerretDB 1.x, which does not know its own
// version, is "FerretDB 1.x (emulates MongoDB 7.0.42, standalone)".
func (s *Server) String() string {
	if s.Kind != KindFerretDB {
		return fmt.Sprintf("%s %s (%s)", s.Kind, s.Version, s.Topology)
	}
	own := s.FerretDBVersion
	if own == "" || own == "unknown" {
		// FerretDB 1.x says "unknown" when embedded, but its
		// ferretdbVersion field tells the major version; a 2.x with no
		// readable version is named without one.
		own = "(version unknown)"
		if s.ferretDB1 {
			own = "1.x"
		}
	}
	return fmt.Sprintf("FerretDB %s (emulates MongoDB %s, %s)", own, s.Version, s.Topology)
}

// Without returns a copy of s that lacks the given features: what a
// repository would do on a server like s without them. s is unchanged.
func (s *Server) Without(features ...Feature) *Server {
	c := *s
	c.features = make(map[Feature]bool, len(s.features))
	for f, ok := range s.features {
		c.features[f] = ok
	}
	for _, f := range features {
		delete(c.features, f)
	}
	return &c
}

// NewServer builds a Server from what the server said about itself: the
// replies to hello and buildInfo. [Capabilities] calls it; it is exported so
// that the detection rules can be checked without a server, and so that an
// application can check what its own deployment's replies give.
//
// The rules are conservative, a feature is reported only where it is
// confirmed:
//   - MongoDB (a 40-hex-digit gitVersion and a storage engine): its
//     features follow from its version and topology.
//   - FerretDB 2.x (a ferretdb subdocument in buildInfo whose version is
//     2.x): the features measured to work as on MongoDB (see the
//     constants, which say what FerretDB 2.x gets silently wrong).
//   - FerretDB 1.x (a ferretdbVersion field) gets none: it lacks or
//     silently ignores every feature; a FerretDB major version this code
//     does not know gets none either.
//   - Any other server (Amazon DocumentDB, Azure Cosmos DB, ...) gets none.
func NewServer(hello, buildInfo bson.Raw) (*Server, error) {
	var h struct {
		SetName                      string `bson:"setName"`
		Msg                          string `bson:"msg"`
		LogicalSessionTimeoutMinutes *int64 `bson:"logicalSessionTimeoutMinutes"`
	}
	if err := bson.Unmarshal(hello, &h); err != nil {
		return nil, fmt.Errorf("decode hello reply: %w", err)
	}
	var b struct {
		Version         string   `bson:"version"`
		GitVersion      string   `bson:"gitVersion"`
		StorageEngines  []string `bson:"storageEngines"`
		FerretDBVersion *string  `bson:"ferretdbVersion"`
		FerretDB        *struct {
			Version string `bson:"version"`
		} `bson:"ferretdb"`
	}
	if err := bson.Unmarshal(buildInfo, &b); err != nil {
		return nil, fmt.Errorf("decode buildInfo reply: %w", err)
	}

	s := &Server{Version: parseVersion(b.Version), features: map[Feature]bool{}}
	switch {
	case h.Msg == "isdbgrid":
		s.Topology = Sharded
	case h.SetName != "":
		s.Topology = ReplicaSet
	}
	switch {
	case b.FerretDBVersion != nil:
		s.Kind = KindFerretDB
		s.FerretDBVersion = *b.FerretDBVersion
		s.ferretDB1 = true
	case b.FerretDB != nil:
		s.Kind = KindFerretDB
		s.FerretDBVersion = b.FerretDB.Version
		if parseVersion(strings.TrimPrefix(b.FerretDB.Version, "v")).Major == 2 {
			for _, f := range ferretDB2 {
				s.features[f] = true
			}
		}
		return s, nil
	case gitVersionRE.MatchString(b.GitVersion) && len(b.StorageEngines) > 0:
		s.Kind = KindMongoDB
	default:
		s.Kind = KindOther
	}
	if s.Kind != KindMongoDB {
		return s, nil
	}

	v := s.Version
	sessions := h.LogicalSessionTimeoutMinutes != nil
	set := func(f Feature, ok bool) { s.features[f] = ok }
	set(FeatureTransactions, sessions &&
		(s.Topology == ReplicaSet && v.AtLeast(4, 0) || s.Topology == Sharded && v.AtLeast(4, 2)))
	set(FeaturePushModifiers, v.AtLeast(2, 6))
	set(FeatureArrayFilters, v.AtLeast(3, 6))
	set(FeatureTTLIndexes, true)
	set(FeaturePartialIndexes, v.AtLeast(3, 2))
	set(FeatureJSONSchema, v.AtLeast(3, 6))
	set(FeatureTimeSeries, v.AtLeast(5, 0))
	set(FeatureChangeStreams, s.Topology != Standalone && v.AtLeast(4, 0))
	set(FeatureLookup, v.AtLeast(3, 2))
	set(FeatureGroupMinMaxAvg, true)
	set(FeatureDateTrunc, v.AtLeast(5, 0))
	set(FeaturePipelineUpdates, v.AtLeast(4, 2))
	set(FeaturePullConditions, true)
	set(FeatureUpdateSizeLimit, true)
	set(FeatureFindAndModifyProjection, true)
	set(FeatureBatchedUpdates, true)
	set(FeatureTimeSeriesCustomBucketing, v.AtLeast(6, 3))
	set(FeatureTimeSeriesDeletes, v.AtLeast(7, 0))
	set(FeatureConcurrentUpdates, true)
	set(FeatureCreateManyIndexes, true)
	set(FeatureSortArray, v.AtLeast(5, 2))
	set(FeatureValidators, v.AtLeast(3, 6))
	set(FeatureWritesWithoutShardKey, false) // the cluster's FCV is unknowable from a mongos
	return s, nil
}

// WithFCV returns a copy of s that records the featureCompatibilityVersion
// of a getParameter {featureCompatibilityVersion: 1} reply
// ({featureCompatibilityVersion: {version: "7.0"}}; during an upgrade or
// a downgrade, version is the older of the two, which WithFCV takes), for
// a model of a cluster (internal/shard). It grants no feature: from a
// mongos that reply is the binary version, not the cluster's FCV
// (SERVER-100224), so [FeatureWritesWithoutShardKey] stays absent. s is
// unchanged. A reply without the version is an error.
func (s *Server) WithFCV(getParameter bson.Raw) (*Server, error) {
	var r struct {
		FCV struct {
			Version string `bson:"version"`
		} `bson:"featureCompatibilityVersion"`
	}
	if err := bson.Unmarshal(getParameter, &r); err != nil {
		return nil, fmt.Errorf("decode getParameter reply: %w", err)
	}
	if r.FCV.Version == "" {
		return nil, fmt.Errorf("getParameter reply without featureCompatibilityVersion.version: %s", getParameter)
	}
	c := *s.Without()
	c.FCV = parseVersion(r.FCV.Version)
	return &c, nil
}

// codeCommandNotFound is the server's error code for an unknown command.
const codeCommandNotFound = 59

// gitVersionRE matches the commit hash that MongoDB's buildInfo reports.
var gitVersionRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

func parseVersion(raw string) Version {
	v := Version{Raw: raw}
	core, _, _ := strings.Cut(raw, "-")
	parts := strings.SplitN(core, ".", 3)
	nums := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			break
		}
		*nums[i] = n
	}
	return v
}

// capsEntry caches one client's Server. The mutex makes concurrent first
// callers wait for one detection instead of each sending their own.
type capsEntry struct {
	mu  sync.Mutex
	srv *Server
}

// capsCache maps a weak pointer to a client to its entry; a cleanup removes
// the entry when the client is garbage collected.
var capsCache sync.Map // weak.Pointer[mongo.Client] -> *capsEntry

// Capabilities reports what the server behind client is and what it can do.
//
// The first call for a client sends two commands to the admin database
// (hello and buildInfo) and caches the answer for the life of the client;
// later calls send nothing. Concurrent first callers share one detection.
// A failed detection is not cached. It reads only; it never writes to any
// database.
func Capabilities(ctx context.Context, client *mongo.Client) (*Server, error) {
	if client == nil {
		return nil, fmt.Errorf("patterns: Capabilities: nil client: %w", ErrInvalid)
	}
	key := weak.Make(client)
	v, loaded := capsCache.LoadOrStore(key, &capsEntry{})
	if !loaded {
		runtime.AddCleanup(client, func(k weak.Pointer[mongo.Client]) { capsCache.Delete(k) }, key)
	}
	e := v.(*capsEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return e.srv, nil
	}
	admin := client.Database("admin")
	op := OperationFrom(ctx) // the repository's operation that asks first counts the commands
	op.Sent(1)
	hello, err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	if ce, ok := errors.AsType[mongo.CommandError](err); ok && ce.Code == codeCommandNotFound {
		// Servers older than MongoDB 4.4.2 know hello as isMaster.
		op.Sent(1)
		hello, err = admin.RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Raw()
	}
	if err != nil {
		return nil, fmt.Errorf("patterns: Capabilities: hello: %w", err)
	}
	op.Sent(1)
	bi, err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Raw()
	if err != nil {
		return nil, fmt.Errorf("patterns: Capabilities: buildInfo: %w", err)
	}
	srv, err := NewServer(hello, bi)
	if err != nil {
		return nil, fmt.Errorf("patterns: Capabilities: %w", err)
	}
	e.srv = srv
	return srv, nil
}
