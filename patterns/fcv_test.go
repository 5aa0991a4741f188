package patterns_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestFCVReadFromMongos (issue 33 regression): patterns/capabilities.go,
// FeatureWritesWithoutShardKey, said: "an 8.0 cluster still at FCV 7.0 (the
// usual state during an upgrade) refuses them as 7.0 does. Detected from
// hello's msg "isdbgrid", the version and, on a mongos 7.1+,
// getParameter's featureCompatibilityVersion"; docs/sharding.md: "an 8.0
// cluster still at FCV 7.0, as during an upgrade, refuses them as 7.0
// does"; extref/doc.go: "(mongos 7.1+ at FCV 7.1+, read by getParameter;
// when the FCV cannot be read, the feature is absent and Update reads
// first, which works on every version)".
//
// Reference: the manual (setFeatureCompatibilityVersion / getParameter):
// reading the FCV "is undefined on the mongos instances"; SERVER-39052;
// SERVER-100224 and SERVER-118760 (mongos 8.0 and 8.2 answer getParameter
// featureCompatibilityVersion "with the current binary version"); the
// downstream notice COMPASS-10539: "Relying on this value when retrieved
// from a MongoS is incorrect, as it reflects the binary version of the
// process rather than the actual FCV of the cluster ... Starting with
// version 8.3.0, this command now returns an InvalidOptions error when run
// against a MongoS". mongodb/mongo jstests: "mongos does not sync FCV with
// the shards. The FCV on mongos will not be downgraded".
//
// So the reply Capabilities reads from an 8.0 mongos is {version: "8.0"}
// whatever the cluster's FCV, and the one case the detection exists for,
// an 8.0 cluster still at FCV 7.0, is reported as having the feature:
// extref.Update under Config.ShardKey then skips its read and sends the
// findAndModify by _id alone, which the package (and internal/shard, 8.0
// at FCV 7.0) says is refused (61). On 8.3+ mongos the command fails and
// the feature is never present, so "it skips the read" never holds there.
func TestFCVReadFromMongos(t *testing.T) {
	mongos := bson.D{{Key: "msg", Value: "isdbgrid"}, {Key: "logicalSessionTimeoutMinutes", Value: int32(30)}}
	s, err := patterns.NewServer(raw(t, mongos), raw(t, bson.D{{Key: "version", Value: "8.0.4"}, {Key: "gitVersion", Value: sha}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}}))
	require.NoError(t, err)
	// What an 8.0.4 mongos answers to getParameter featureCompatibilityVersion
	// for a cluster whose shards and config servers are still at FCV 7.0:
	// its binary version (SERVER-100224).
	reply := raw(t, bson.D{{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: "8.0"}}}, {Key: "ok", Value: 1.0}})
	w, err := s.WithFCV(reply)
	require.NoError(t, err)
	require.False(t, w.Has(patterns.FeatureWritesWithoutShardKey),
		"a mongos's getParameter featureCompatibilityVersion is its binary version, not the cluster's FCV: the cluster may be at FCV 7.0, where the package says writes without the shard key are refused (61/72); the feature was derived from it")
}
