package bsonkinds_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestOrder: the classes in the manual's order (Comparison/Sort Order:
// MinKey, null, numbers, symbol and string, object, array, BinData,
// ObjectId, boolean, date, timestamp, regular expression, JavaScript
// code, JavaScript code with scope, MaxKey), with undefined and DBPointer
// where MongoDB's canonicalizeBSONType puts them (undefined before null,
// DBPointer between regular expressions and JavaScript); every value in
// order of its class, then of its rank; names unique; every class there.
func TestOrder(t *testing.T) {
	manual := []string{"MinKey", "undefined", "null", "number", "string", "object", "array", "binData", "ObjectId", "bool", "date", "timestamp", "regex", "DBPointer", "JavaScript", "JavaScript with scope", "MaxKey"}
	var classes []string
	for c := bsonkinds.MinKey; c <= bsonkinds.MaxKey; c++ {
		classes = append(classes, c.String())
		require.NotEmpty(t, bsonkinds.Of(c), "class %s has values", c)
	}
	require.Equal(t, manual, classes)

	all := bsonkinds.All()
	names := map[string]bool{}
	for i, v := range all {
		require.False(t, names[v.Name], "name %q is unique", v.Name)
		names[v.Name] = true
		require.Equal(t, v.Missing, v.V.Type == 0, v.Name)
		if i == 0 {
			continue
		}
		p := all[i-1]
		require.LessOrEqual(t, p.Class, v.Class, "%s before %s", p.Name, v.Name)
		require.LessOrEqual(t, p.Rank, v.Rank, "%s before %s", p.Name, v.Name)
		require.Equal(t, p.Rank == v.Rank, bsonkinds.Compare(p, v) == 0)
		if p.Rank == v.Rank {
			require.Equal(t, p.Class, v.Class, "equal values are of one class")
		}
	}
	for _, c := range []bsonkinds.Class{bsonkinds.Undefined, bsonkinds.Array, bsonkinds.Regex} {
		for _, v := range bsonkinds.Of(c) {
			require.False(t, v.IsID(), v.Name)
		}
	}
	require.True(t, slices.ContainsFunc(bsonkinds.All(), func(v bsonkinds.Value) bool { return v.Missing }))
}

// TestServerOrder checks the generator against the server: every value
// MongoDB stores as an _id, inserted in turn, is stored, or refused as a
// duplicate exactly when an equal value (same rank) is stored already, or
// refused by a server that cannot store its type (FerretDB 1.x: Decimal128,
// NaN, infinities, MinKey, MaxKey, symbols, JavaScript, DBPointer); the
// values stored come back by a sort on _id in the generator's order.
func TestServerOrder(t *testing.T) {
	ctx := context.Background()
	coll := mongotest.DB(t).Collection("c")
	stored := map[int]string{} // by rank
	var refused []string
	for _, v := range bsonkinds.IDs() {
		_, err := coll.InsertOne(ctx, v.Doc("_id"))
		prior, equal := stored[v.Rank]
		switch {
		case err == nil:
			require.False(t, equal, "%s is %s to the server, stored already", v.Name, prior)
			stored[v.Rank] = v.Name
		case mongo.IsDuplicateKeyError(err):
			require.True(t, equal, "%s is equal to no stored value: %v", v.Name, err)
		default:
			refused = append(refused, v.Name)
		}
	}
	mongotest.Detail(t, "refused: %q", refused)
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	require.NoError(t, err)
	var docs []bson.Raw
	require.NoError(t, cur.All(ctx, &docs))
	// Compared by rank: FerretDB 1.x reads -0 back as 0 (equal to the
	// server, not the same bytes).
	var got, want []int
	for _, d := range docs {
		id := d.Lookup("_id")
		i := slices.IndexFunc(bsonkinds.IDs(), func(v bsonkinds.Value) bool { return v.V.Type == id.Type && slices.Equal(v.V.Value, id.Value) })
		require.GreaterOrEqual(t, i, 0, "a generated value: %v", id)
		got = append(got, bsonkinds.IDs()[i].Rank)
	}
	for _, v := range bsonkinds.IDs() {
		if stored[v.Rank] == v.Name {
			want = append(want, v.Rank)
		}
	}
	require.Equal(t, want, got)
}

// TestOdd: the odd _ids are those of the classes outside null to
// timestamps, the symbols and the NaNs.
func TestOdd(t *testing.T) {
	var names []string
	for _, v := range bsonkinds.Odd() {
		names = append(names, v.Name)
	}
	require.Equal(t, []string{"MinKey", "double NaN", "decimal NaN", "symbol a", "symbol b", "DBPointer", "JavaScript x", "JavaScript y", "JavaScript with scope", "MaxKey"}, names)
}
