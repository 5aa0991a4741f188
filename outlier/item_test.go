package outlier

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func rawValue(t testing.TB, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

// TestIDsCompareAsTheServerDoes: the server finds 7, int64(7) and 7.0
// to be one id, and so does the repository: an item stored with one of
// them is the item a retried Append or a Remove names with another.
// (FerretDB 1.x has no decimal128; TestIDKeys covers it.)
func TestIDsCompareAsTheServerDoes(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r, err := New[bson.Raw, note](db, small())
		require.NoError(t, err)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		ForcePlan(r, p)
		_, err = r.Insert(ctx, bson.Raw(must(bson.Marshal(bson.D{{Key: "_id", Value: 1}}))))
		require.NoError(t, err)

		// In the parent, then in an overflow document.
		require.NoError(t, r.Append(ctx, 1, note{ID: 7.0, Text: "a"}, note{ID: 1}, note{ID: 2}, note{ID: int32(8), Text: "b"}))
		require.NoError(t, r.Append(ctx, 1, note{ID: 7, Text: "again"}, note{ID: "new"}))
		n, err := r.Count(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 5, n, "7 is the stored 7.0: not appended twice")
		require.NoError(t, r.Append(ctx, 1, note{ID: 8.0}, note{ID: 3}), "8 is stored; 3 is new")
		n, err = r.Count(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 6, n)

		if p.pullByCondition {
			mongotest.Require(t, patterns.FeaturePullConditions)
		}
		require.NoError(t, r.Remove(ctx, 1, int64(7)))
		require.NoError(t, r.Remove(ctx, 1, 8.0))
		n, err = r.Count(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 4, n)
	})
}

// TestIDKeys: ids are told apart exactly as the server tells them apart,
// decimal128 included, when Append checks a call's ids and when the
// portable Remove picks the elements to pull.
func TestIDKeys(t *testing.T) {
	r, err := New[bson.Raw, note](offline, valid())
	require.NoError(t, err)
	budget := overflowBudget(rawValue(t, 1))
	dec := func(s string) bson.Decimal128 { return must(bson.ParseDecimal128(s)) }

	for _, same := range [][2]any{{dec("7.00"), 7}, {dec("8.5"), 8.5}, {int64(9), 9.0}, {dec("-1.0"), int32(-1)}} {
		_, err := r.encodeItems([]note{{ID: same[0]}, {ID: same[1]}}, budget)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%v and %v", same[0], same[1])
		require.ErrorContains(t, err, "items 0 and 1 have the same _id")
	}
	_, err = r.encodeItems([]note{{ID: dec("7.01")}, {ID: 7}, {ID: "7"}}, budget)
	require.NoError(t, err)

	arr := must(bson.Marshal(bson.D{{Key: "0", Value: note{ID: dec("7.0"), Text: "x"}}, {Key: "1", Value: note{ID: 8}}}))
	elems, err := r.matching(bson.RawArray(arr), bsonid.Key(rawValue(t, 7)))
	require.NoError(t, err)
	require.Len(t, elems, 1, "the decimal 7.0 is the item 7")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

type note struct {
	ID   any    `bson:"_id,omitempty"`
	Text string `bson:"text"`
}

func TestEncodeItems(t *testing.T) {
	r, err := New[bson.Raw, note](offline, valid())
	require.NoError(t, err)
	budget := overflowBudget(rawValue(t, 1))

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
	b := overflowBudget(rawValue(t, int32(1)))
	for _, same := range []any{int64(1), 1.0, must(bson.ParseDecimal128("1"))} {
		require.Equal(t, b, overflowBudget(rawValue(t, same)), "one parent, whatever the type of its id: %T", same)
	}
	env, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.NewObjectID()}, {Key: "parent", Value: must(bson.ParseDecimal128("1"))},
		{Key: "seq", Value: int64(3)}, {Key: "count", Value: int64(20)}, {Key: "bytes", Value: int64(99999)},
		{Key: "items", Value: bson.A{}},
	})
	require.NoError(t, err)
	require.Equal(t, patterns.MaxDocumentSize-len(env), b, "the fixed fields do not change size as they grow; a number is counted as wide as a decimal")
	longer := overflowBudget(rawValue(t, "a longer parent id"))
	require.Less(t, longer, b)

	// Numbers inside a document or array id are one parent whatever their
	// types too ({k: 7} and {k: NumberDecimal(7)}), so each counts as wide
	// as a decimal: the budget is the widest form's.
	dec := must(bson.ParseDecimal128("7"))
	widest := overflowBudget(rawValue(t, bson.D{{Key: "k", Value: dec}, {Key: "a", Value: bson.A{dec, bson.D{{Key: "n", Value: dec}}}}}))
	for _, same := range []any{
		bson.D{{Key: "k", Value: int32(7)}, {Key: "a", Value: bson.A{int64(7), bson.D{{Key: "n", Value: 7.0}}}}},
		bson.D{{Key: "k", Value: 7.0}, {Key: "a", Value: bson.A{int32(7), bson.D{{Key: "n", Value: int32(7)}}}}},
	} {
		require.Equal(t, widest, overflowBudget(rawValue(t, same)), "%v", same)
	}
	require.Equal(t, overflowBudget(rawValue(t, bson.A{dec})), overflowBudget(rawValue(t, bson.A{int32(7)})))
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

// TestGoValue: the ids decoded directly are what the decoder gives.
func TestGoValue(t *testing.T) {
	for _, v := range []any{"c1", "", bson.NewObjectID(), int32(7), int64(1) << 40, 7.5, true, bson.Regex{Pattern: "."}} {
		raw := rawValue(t, v)
		var want any
		require.NoError(t, raw.Unmarshal(&want))
		got, err := goValue(raw)
		require.NoError(t, err)
		require.Equal(t, want, got, "%T", v)
	}
}

// TestEncodeID: the ids encoded directly are what the encoder writes.
func TestEncodeID(t *testing.T) {
	for _, v := range []any{"c1", "", bson.NewObjectID(), int32(7), int64(7), 7, -1 << 31, 1 << 31, int64(1) << 40, 7.5, true, bson.Regex{Pattern: "."}} {
		got, err := encodeID(v)
		require.NoError(t, err)
		require.Equal(t, rawValue(t, v), got, "%T %v", v, v)
	}
}
