package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestAttackUpsertKeyMatchedTwice: shard.go promises "from 7.1 on, a
// single upsert goes where its filter goes (one shard, or a two-phase
// write)", and says a field matched by equality twice ({$and: [{a: 1},
// {a: 1}]}, {a: {$all: [1, 1]}}) "still reaches one shard by its bounds";
// TestRules routes "an upsert with the key twice by $and" (one or two
// values) and "an upsert by $all of two values" to one shard, accepted,
// from 7.1.
//
// The shard refuses such an upsert when it has to insert, whatever the
// version and the sharding: it builds the document to insert from the
// filter's equalities (update_driver.cpp populateDocumentWithQueryFields ->
// pathsupport::extractFullEqualityMatches), and the very check the
// package cites, mongodb/mongo src/mongo/db/update/path_support.cpp
// checkEqualityConflicts, fails with NotSingleValueField (54) "cannot infer
// query fields to set, path 'a' is matched twice" (drivers' users report
// {'code': 54, 'errmsg': "cannot infer query fields to set, path 'a' is
// matched twice"}, and the same for $all on one array field). From 7.1 the
// upsert, without an exact shard key, goes through the two-phase protocol
// (write_without_shard_key_util.cpp useTwoPhaseProtocol: no exact key ->
// true), whose read phase generates that document
// (generateUpsertDocument, "Only use when {upsert: true}") when nothing
// matches: refused (54), not an accepted one-shard upsert. Before 7.1
// mongos refuses it first (61), as the package says.
func TestAttackUpsertKeyMatchedTwice(t *testing.T) {
	keys := map[string]Key{"status": key(bson.D{{Key: "status", Value: 1}})}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}
	twice := func(a, b any) bson.D {
		return bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "status", Value: a}}, bson.D{{Key: "status", Value: b}}}}}
	}
	for _, tc := range []struct {
		name string
		q    bson.D
	}{
		{"the key twice by $and", twice("paid", "paid")},
		{"the key twice by $and, two values", twice("paid", "due")},
		{"$all of two values", bson.D{{Key: "status", Value: bson.D{{Key: "$all", Value: bson.A{"paid", "paid"}}}}}},
	} {
		for _, c := range Clusters(keys) {
			t.Run(tc.name+"/"+fmt.Sprintf("%d.%d", c.Version.Major, c.Version.Minor)+fcvName(c), func(t *testing.T) {
				got, err := c.Route(raw(t, upd("status", tc.q, set, false, true)))
				require.NoError(t, err)
				want := int32(61)
				if c.WritesWithoutShardKey() {
					want = 54
				}
				require.Equal(t, Refused, got.Target, "%s on %s (path_support.cpp checkEqualityConflicts: NotSingleValueField 54 when the upsert inserts)", got, c)
				require.Equal(t, want, got.Code, "%s on %s", got, c)
			})
		}
	}
}
