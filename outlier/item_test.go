package outlier

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func rawValue(t testing.TB, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

func TestKeyOf(t *testing.T) {
	same := [][]any{
		{int32(7), int64(7), 7.0, 7},
		{"7"},
		{7.5},
		{bson.ObjectID{1}},
	}
	for i, group := range same {
		for _, v := range group {
			require.Equal(t, keyOf(rawValue(t, group[0])), keyOf(rawValue(t, v)), "%T %v", v, v)
		}
		for _, other := range same[i+1:] {
			require.NotEqual(t, keyOf(rawValue(t, group[0])), keyOf(rawValue(t, other[0])))
		}
	}
}

// FuzzKeyOf: ids that the server finds equal have one key; ids it tells
// apart have different keys.
func FuzzKeyOf(f *testing.F) {
	f.Add(int64(0), "a", 0.5)
	f.Add(int64(math.MaxInt64), "", math.Inf(1))
	f.Add(int64(-3), "-3", -3.0)
	f.Fuzz(func(t *testing.T, n int64, s string, x float64) {
		kn := keyOf(rawValue(t, n))
		if n == int64(int32(n)) {
			require.Equal(t, kn, keyOf(rawValue(t, int32(n))))
		}
		// float64(n) is the same number only when it converts back exactly.
		f := float64(n)
		require.Equal(t, f < math.MaxInt64 && int64(f) == n, kn == keyOf(rawValue(t, f)), "%d and %v", n, f)
		integral := x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64
		require.Equal(t, integral, keyOf(rawValue(t, x)) == keyOf(rawValue(t, int64(x))), "%v and %d", x, int64(x))
		require.NotEqual(t, keyOf(rawValue(t, s)), kn, "a string is never a number")
		require.Equal(t, s == "x", keyOf(rawValue(t, s)) == keyOf(rawValue(t, "x")))
	})
}

type note struct {
	ID   any    `bson:"_id,omitempty"`
	Text string `bson:"text"`
}

func TestEncodeItems(t *testing.T) {
	r, err := New[bson.Raw, note](offline, valid())
	require.NoError(t, err)
	budget, err := overflowBudget(1)
	require.NoError(t, err)

	items, err := r.encodeItems([]note{{ID: "a", Text: "x"}, {ID: 2}}, budget)
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Equal(t, "a", items[0].id.StringValue())

	bad := []struct {
		name  string
		items []note
		want  string
	}{
		{"no id", []note{{Text: "x"}}, `no "_id" field`},
		{"operator injection", []note{{ID: bson.M{"$ne": nil}}}, "item _id"},
		{"empty string", []note{{ID: ""}}, "item 0"},
		{"regex", []note{{ID: bson.Regex{Pattern: ".*"}}}, "item _id"},
		{"same id twice", []note{{ID: 1}, {ID: "b"}, {ID: int64(1)}}, "items 0 and 2"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.encodeItems(tc.items, budget)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// The largest item an empty overflow document holds, and one byte more.
	overhead := elementSize(r.cfg.OverflowCap-1, 0)
	fit := note{ID: 1}
	empty, err := bson.Marshal(fit)
	require.NoError(t, err)
	fit.Text = strings.Repeat("x", budget-overhead-len(empty))
	_, err = r.encodeItems([]note{fit}, budget)
	require.NoError(t, err)
	fit.Text += "x"
	_, err = r.encodeItems([]note{fit}, budget)
	require.ErrorIs(t, err, patterns.ErrTooLarge)
}

func TestOverflowBudget(t *testing.T) {
	b, err := overflowBudget(int32(1))
	require.NoError(t, err)
	env, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.NewObjectID()}, {Key: "parent", Value: int32(1)},
		{Key: "seq", Value: int64(3)}, {Key: "count", Value: int64(20)}, {Key: "bytes", Value: int64(99999)},
		{Key: "items", Value: bson.A{}},
	})
	require.NoError(t, err)
	require.Equal(t, patterns.MaxDocumentSize-len(env), b, "the fixed fields do not change size as they grow")
	longer, err := overflowBudget("a longer parent id")
	require.NoError(t, err)
	require.Less(t, longer, b)
}

func TestElementSize(t *testing.T) {
	for _, i := range []int{0, 9, 10, 99, 100, 12345} {
		doc, err := bson.Marshal(bson.D{{Key: "a", Value: bson.A{}}})
		require.NoError(t, err)
		arr := make(bson.A, i+1)
		for j := range arr {
			arr[j] = "v"
		}
		grown, err := bson.Marshal(bson.D{{Key: "a", Value: arr}})
		require.NoError(t, err)
		arr = arr[:i]
		before, err := bson.Marshal(bson.D{{Key: "a", Value: arr}})
		require.NoError(t, err)
		_ = doc
		require.Equal(t, len(grown)-len(before), elementSize(i, len("v")+5), "appending at index %d", i)
	}
}
