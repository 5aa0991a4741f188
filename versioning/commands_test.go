package versioning

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// ejson renders v as relaxed extended JSON, to pin documents exactly
// (field order included) in a readable form.
func ejson(t testing.TB, v any) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(v, false, false)
	require.NoError(t, err)
	return string(b)
}

// ejsonValue renders any value, a pipeline included, as ejson does.
func ejsonValue(t testing.TB, v any) string {
	t.Helper()
	doc := ejson(t, bson.D{{Key: "u", Value: v}})
	return doc[len(`{"u":`) : len(doc)-1]
}

func mustRaw(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

// users is the schema of the tests: versions 1 to 3, the default fields.
var users = schema{field: "schemaVersion", revField: "_rev", current: 3, implicit: 1, oldest: 1}

// Every builder is the same for every plan: the plans choose which
// builders an operation uses (sent_test.go pins the commands each plan
// sends, as the driver encodes them).
func TestFiltersArePinned(t *testing.T) {
	rev := bson.NewObjectID()
	oid := `{"$oid":"` + rev.Hex() + `"}`
	v1 := bson.D{{Key: "_id", Value: "u1"}, {Key: "name", Value: "Ada Lovelace"}}

	require.Equal(t, `{"_id":"u1"}`, ejson(t, idFilter("u1")))
	require.Equal(t,
		`{"_id":"u1","schemaVersion":{"$exists":false},"_rev":{"$exists":false}}`,
		ejson(t, users.casFilter(mustRaw(t, v1))),
		"a document without version or revision is replaced only while both are still absent")
	require.Equal(t,
		`{"_id":"u1","schemaVersion":{"$eq":2,"$not":{"$type":"array"}},"_rev":{"$eq":`+oid+`}}`,
		ejson(t, users.casFilter(mustRaw(t, bson.D{{Key: "_id", Value: "u1"}, {Key: "schemaVersion", Value: 2}, {Key: "_rev", Value: rev}}))),
		"the version and revision read, with their BSON types")
	require.Equal(t,
		`{"_id":"u1","schemaVersion":{"$eq":2.0,"$not":{"$type":"array"}},"_rev":{"$exists":false}}`,
		ejson(t, users.casFilter(mustRaw(t, bson.D{{Key: "_id", Value: "u1"}, {Key: "schemaVersion", Value: 2.0}}))))

	require.Equal(t, `{"_id":"u1","schemaVersion":{"$eq":3,"$not":{"$type":"array"}}}`, ejson(t, users.currentFilter(idFilter("u1"))), "never an array that contains 3")
	require.Equal(t, `{"_id":"u1","schemaVersion":{"$not":{"$gt":3}}}`, ejson(t, users.notNewerFilter(idFilter("u1"))))
	require.Equal(t, `{"_id":"u1","_rev":{"$eq":`+oid+`}}`, ejson(t, users.stampedFilter(mustRaw(t, v1), rev)))
	require.Equal(t, `{"_id":"u1","_rev":{"$eq":`+oid+`}}`, ejson(t, users.restoreFilter(mustRaw(t, v1), rev)),
		"a document read without a revision is put back while it holds the update's")
	prev := bson.NewObjectID()
	require.Equal(t, `{"_id":"u1","_rev":{"$in":[`+oid+`,{"$oid":"`+prev.Hex()+`"}]}}`,
		ejson(t, users.restoreFilter(mustRaw(t, bson.D{{Key: "_id", Value: "u1"}, {Key: "_rev", Value: prev}}), rev)),
		"or while it holds its own revision again: the put-back already landed")
	require.Equal(t, `{"schemaVersion":{"$not":{"$gte":3}}}`, ejson(t, users.scanFilter()))
	require.Equal(t, `[{"$group":{"_id":"$schemaVersion","n":{"$sum":1}}}]`, ejsonValue(t, users.statsPipeline()))
	require.Equal(t, `{"schemaVersion":1}`, ejson(t, users.versionIndex()))

	// Documents without the field are current: they match updates, and
	// MigrateAll leaves them alone.
	cur := schema{field: "v", revField: "_rev", current: 3, implicit: 3, oldest: 1}
	require.Equal(t, `{"_id":"u1","v":{"$in":[3,null],"$not":{"$type":"array"}}}`, ejson(t, cur.currentFilter(idFilter("u1"))))
	require.Equal(t, `{"v":{"$ne":null,"$not":{"$gte":3}}}`, ejson(t, cur.scanFilter()))
}

// TestShardKeyFiltersArePinned: with Config.ShardKey, every filter of a
// write that follows a read holds the shard key's values as read (null
// for a missing field), after the _id; the filters that follow no read
// are those of an unsharded collection.
func TestShardKeyFiltersArePinned(t *testing.T) {
	s := users
	s.shardKey = []string{"tenant", "geo.region"}
	rev := bson.NewObjectID()
	oid := `{"$oid":"` + rev.Hex() + `"}`
	read := mustRaw(t, bson.D{{Key: "_id", Value: "u1"}, {Key: "tenant", Value: "acme"}, {Key: "geo", Value: bson.D{{Key: "region", Value: "eu"}}},
		{Key: "schemaVersion", Value: 2}, {Key: "_rev", Value: rev}})
	key := `"_id":"u1","tenant":{"$eq":"acme"},"geo.region":{"$eq":"eu"}`
	require.Equal(t, `{`+key+`,"schemaVersion":{"$eq":2,"$not":{"$type":"array"}},"_rev":{"$eq":`+oid+`}}`, ejson(t, s.casFilter(read)))
	require.Equal(t, `{`+key+`,"_rev":{"$eq":`+oid+`}}`, ejson(t, s.stampedFilter(read, rev)))
	require.Equal(t, `{`+key+`,"_rev":{"$in":[`+oid+`,`+oid+`]}}`, ejson(t, s.restoreFilter(read, rev)))
	require.Equal(t, `{"_id":"u1","tenant":{"$eq":null},"geo.region":{"$eq":null},"schemaVersion":{"$exists":false},"_rev":{"$exists":false}}`,
		ejson(t, s.casFilter(mustRaw(t, bson.D{{Key: "_id", Value: "u1"}}))), "a missing field is routed as null")
	require.Equal(t, ejson(t, users.currentFilter(idFilter("u1"))), ejson(t, s.currentFilter(idFilter("u1"))), "no read, no shard key: the _id alone")
	require.Equal(t, `{`+key+`,"schemaVersion":{"$eq":3,"$not":{"$type":"array"}}}`, ejson(t, s.currentFilter(s.docFilter(read))), "after a read, the shard key as read")
	require.Equal(t, ejson(t, users.notNewerFilter(idFilter("u1"))), ejson(t, s.notNewerFilter(idFilter("u1"))))
	require.Equal(t, ejson(t, users.scanFilter()), ejson(t, s.scanFilter()))
}

func TestStampDocIsPinned(t *testing.T) {
	rev := bson.NewObjectID()
	oid := `{"$oid":"` + rev.Hex() + `"}`
	for _, tt := range []struct {
		name string
		doc  bson.D
		want string
	}{
		{"appends both", bson.D{{Key: "_id", Value: "a"}, {Key: "first", Value: "Ada"}},
			`{"_id":"a","first":"Ada","schemaVersion":3,"_rev":` + oid + `}`},
		{"keeps their places", bson.D{{Key: "_id", Value: "a"}, {Key: "schemaVersion", Value: 1}, {Key: "first", Value: "Ada"}, {Key: "_rev", Value: "old"}},
			`{"_id":"a","schemaVersion":3,"first":"Ada","_rev":` + oid + `}`},
		{"no _id", bson.D{{Key: "first", Value: "Ada"}},
			`{"first":"Ada","schemaVersion":3,"_rev":` + oid + `}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := users.stampDoc(mustRaw(t, tt.doc), rev)
			require.NoError(t, err)
			require.NoError(t, got.Validate())
			require.Equal(t, tt.want, ejson(t, got))
			require.Equal(t, int32(3), got.Lookup("schemaVersion").Int32(), "the version is an int32")
		})
	}
}

func TestStampUpdateIsPinned(t *testing.T) {
	s := schema{field: "v", revField: "_rev", current: 3, implicit: 1, oldest: 1}
	rev := bson.NewObjectID()
	oid := `{"$oid":"` + rev.Hex() + `"}`
	tests := []struct {
		name     string
		update   any
		want     string
		pipeline bool
	}{
		{"adds a $set", bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}},
			`{"$inc":{"visits":1},"$set":{"v":3,"_rev":` + oid + `}}`, false},
		{"extends the caller's $set in place", bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a@b"}}}, {Key: "$unset", Value: bson.D{{Key: "x", Value: ""}}}},
			`{"$set":{"email":"a@b","v":3,"_rev":` + oid + `},"$unset":{"x":""}}`, false},
		{"a map", bson.M{"$inc": bson.M{"visits": 2}},
			`{"$inc":{"visits":2},"$set":{"v":3,"_rev":` + oid + `}}`, false},
		{"paths that merely start like the fields", bson.D{{Key: "$set", Value: bson.D{{Key: "vx", Value: 1}, {Key: "_revision", Value: 1}}}},
			`{"$set":{"vx":1,"_revision":1,"v":3,"_rev":` + oid + `}}`, false},
		{"a pipeline ends with the stamp", mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$add", Value: bson.A{"$n", 1}}}}}}}},
			`[{"$set":{"n":{"$add":["$n",1]}}},{"$set":{"v":3,"_rev":` + oid + `}}]`, true},
		{"a bson.A pipeline", bson.A{bson.M{"$unset": "x"}},
			`[{"$unset":"x"},{"$set":{"v":3,"_rev":` + oid + `}}]`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pipeline, err := s.stampUpdate(tt.update, rev)
			require.NoError(t, err)
			require.Equal(t, tt.pipeline, pipeline)
			require.Equal(t, tt.want, ejsonValue(t, got))
			if pipeline {
				requireDriverEncodesPipeline(t, got)
			}
		})
	}
}

// requireDriverEncodesPipeline encodes a pipeline update as the driver
// does when it builds the update command: each stage alone, as a
// document (marshalUpdateValue in the driver's mongo package). A stage
// the driver cannot encode there would fail every pipeline update in the
// client, before anything is sent.
func requireDriverEncodesPipeline(t testing.TB, update any) {
	t.Helper()
	stages, ok := update.(bson.A)
	require.True(t, ok, "a pipeline is a bson.A, got %T", update)
	for i, st := range stages {
		_, err := bson.Marshal(st)
		require.NoError(t, err, "stage %d (%T) does not encode as a document", i, st)
	}
}

func TestStampUpdateRejects(t *testing.T) {
	s := schema{field: "v", revField: "_rev", current: 3, implicit: 1, oldest: 1}
	tests := []struct {
		name   string
		update any
		want   string
	}{
		{"nil", nil, "update is nil"},
		{"empty", bson.D{}, "update is empty"},
		{"a replacement", bson.D{{Key: "email", Value: "x"}}, `"email" is not an update operator`},
		{"operator on a scalar", bson.D{{Key: "$set", Value: 1}}, "takes a document"},
		{"twice", bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}, "appears twice"},
		{"sets the version", bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 9}}}}, `touches "v"`},
		{"increments the version", bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}, `touches "v"`},
		{"a path under the version", bson.D{{Key: "$set", Value: bson.D{{Key: "v.x", Value: 1}}}}, `touches "v.x"`},
		{"unsets the revision", bson.D{{Key: "$unset", Value: bson.D{{Key: "_rev", Value: ""}}}}, `touches "_rev"`},
		{"renames onto the version", bson.D{{Key: "$rename", Value: bson.D{{Key: "old", Value: "v"}}}}, `touches "v"`},
		{"renames the revision away", bson.D{{Key: "$rename", Value: bson.D{{Key: "_rev", Value: "r"}}}}, `touches "_rev"`},
		{"a scalar", 42, "BSON 32-bit integer"},
		{"empty pipeline", mongo.Pipeline{}, "pipeline is empty"},
		{"pipeline of scalars", bson.A{1}, "stage 0"},
		{"not encodable", make(chan int), "encode the update"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.stampUpdate(tt.update, bson.NewObjectID())
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// FuzzStampUpdate feeds arbitrary documents to stampUpdate: it either
// refuses them with ErrInvalid or returns an update the driver can encode
// whose only writes to the version and revision fields are the stamp.
func FuzzStampUpdate(f *testing.F) {
	for _, seed := range []any{
		bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}},
		bson.D{{Key: "$rename", Value: bson.D{{Key: "a", Value: "v"}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "v.x", Value: 1}}}, {Key: "$set", Value: bson.D{}}},
		bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}},
	} {
		b, err := bson.Marshal(bson.D{{Key: "u", Value: seed}})
		require.NoError(f, err)
		f.Add(b)
	}
	s := schema{field: "v", revField: "_rev", current: 3, implicit: 1, oldest: 1}
	rev := bson.NewObjectID()
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := bson.Raw(data).LookupErr("u")
		if err != nil || bson.Raw(data).Validate() != nil {
			return
		}
		got, pipeline, err := s.stampUpdate(u, rev)
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			return
		}
		if pipeline {
			requireDriverEncodesPipeline(t, got)
			stages := got.(bson.A)
			require.Equal(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: int32(3)}, {Key: "_rev", Value: rev}}}}, stages[len(stages)-1])
			return
		}
		_, err = bson.Marshal(got)
		require.NoError(t, err)
		stamps := 0
		for _, op := range got.(bson.D) {
			if op.Key == "$set" {
				set := op.Value.(bson.D)
				require.Equal(t, bson.D{{Key: "v", Value: int32(3)}, {Key: "_rev", Value: rev}}, set[len(set)-2:])
				stamps++
				set = set[:len(set)-2]
				for _, e := range set {
					require.NotContains(t, []string{"v", "_rev"}, e.Key)
				}
				continue
			}
			elems, err := op.Value.(bson.Raw).Elements()
			require.NoError(t, err)
			for _, e := range elems {
				require.NotRegexp(t, `^(v|_rev)(\.|$)`, e.Key())
			}
		}
		require.Equal(t, 1, stamps)
	})
}
