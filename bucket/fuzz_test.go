package bucket

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func mustDoc(d bson.D) []byte {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzMetaValue feeds documents to the meta validator: it never panics,
// and what it accepts is an equality on a canonical document: no '$' key
// at any depth, keys sorted at every depth, and canonical again unchanged.
func FuzzMetaValue(f *testing.F) {
	f.Add(mustDoc(bson.D{{Key: "site", Value: "a"}, {Key: "id", Value: 7}}))
	f.Add(mustDoc(bson.D{{Key: "$ne", Value: nil}}))
	f.Add(mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}}))
	f.Add(mustDoc(bson.D{{Key: "b", Value: bson.A{bson.D{{Key: "z", Value: 1}, {Key: "y", Value: 2}}}}, {Key: "a", Value: bson.Regex{Pattern: "x"}}}))
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Add([]byte("not bson"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bson.Raw(data).Validate() != nil {
			return
		}
		v, err := metaValue(bson.Raw(data))
		if err != nil {
			return
		}
		require.Equal(t, bson.TypeEmbeddedDocument, v.Type)
		checkCanonical(t, v)
		again, err := canonical(v)
		require.NoError(t, err)
		require.True(t, bytes.Equal(v.Value, again.Value), "canonical is idempotent")
	})
}

func checkCanonical(t *testing.T, v bson.RawValue) {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		elems, err := v.Document().Elements()
		require.NoError(t, err)
		for i, e := range elems {
			require.False(t, strings.HasPrefix(e.Key(), "$"), "key %q", e.Key())
			if i > 0 {
				require.LessOrEqual(t, elems[i-1].Key(), e.Key(), "keys are sorted")
			}
			checkCanonical(t, e.Value())
		}
	case bson.TypeArray:
		vals, err := v.Array().Values()
		require.NoError(t, err)
		for _, x := range vals {
			checkCanonical(t, x)
		}
	}
}

// FuzzParse feeds documents to the measurement reader: it never panics,
// and what it accepts has a non-zero date and finite values.
func FuzzParse(f *testing.F) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f.Add(mustDoc(bson.D{{Key: "at", Value: at}, {Key: "v", Value: 1.5}}))
	f.Add(mustDoc(bson.D{{Key: "at", Value: at}, {Key: "v", Value: int32(3)}}))
	f.Add(mustDoc(bson.D{{Key: "at", Value: at}, {Key: "v", Value: math.NaN()}}))
	f.Add(mustDoc(bson.D{{Key: "at", Value: time.Time{}}, {Key: "v", Value: 1.5}}))
	f.Add(mustDoc(bson.D{{Key: "at", Value: "yesterday"}, {Key: "v", Value: "7"}}))
	s := &settings{timeField: "at", valueFields: []string{"v"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bson.Raw(data).Validate() != nil {
			return
		}
		p, err := s.parse(bson.Raw(data))
		if err != nil {
			return
		}
		require.NotEqual(t, zeroTime, p.at)
		require.False(t, math.IsNaN(p.values[0]) || math.IsInf(p.values[0], 0))
	})
}
