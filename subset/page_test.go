package subset_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// shuffled returns n items with scores 1 to 3 (so, many ties), in random
// order.
func shuffled(n int, rng *rand.Rand) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{ID: int64(i + 1), Score: int64(1 + i%3)}
	}
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestPageWalksTheFullSetInOrder(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, descending := range []bool{true, false} {
		t.Run(map[bool]string{true: "descending", false: "ascending"}[descending], func(t *testing.T) {
			db := mongotest.DB(t)
			cfg := config(3)
			cfg.Descending = descending
			r := newRepo[parent, item](t, db, cfg, portable)
			insertParents(t, db, "a", "b")
			items := shuffled(11, rng)
			require.NoError(t, r.Add(ctx, "a", items...))
			require.NoError(t, r.Add(ctx, "b", item{ID: 100, Score: 2}))
			want := stored(t, r, "a")
			require.Len(t, want, 11)

			for _, limit := range []int{1, 3, 10, 11, 12} {
				var got []item
				var after subset.Cursor
				pages := 0
				for {
					page, next, err := r.Page(ctx, "a", after, limit)
					require.NoError(t, err)
					got = append(got, page...)
					pages++
					if next.IsZero() {
						break
					}
					require.Len(t, page, limit, "only the last page is short")
					// The cursor goes to a client as text and comes back.
					after, err = subset.ParseCursor(next.String())
					require.NoError(t, err)
				}
				require.Equal(t, want, got, "limit %d", limit)
				require.Equal(t, (11+limit-1)/limit, pages, "limit %d: no empty last page", limit)
			}
		})
	}
}

func TestPageNeitherSkipsNorRepeatsWhenEarlierItemsChange(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a")
	require.NoError(t, r.Add(ctx, "a", shuffled(9, rand.New(rand.NewPCG(3, 4)))...))
	first, next, err := r.Page(ctx, "a", subset.Cursor{}, 4)
	require.NoError(t, err)
	rest := stored(t, r, "a")[4:]

	require.NoError(t, r.Remove(ctx, "a", first[1].ID))
	require.NoError(t, r.Add(ctx, "a", item{ID: 50, Score: 9}))
	var got []item
	for after := next; ; {
		page, n, err := r.Page(ctx, "a", after, 2)
		require.NoError(t, err)
		got = append(got, page...)
		if after = n; after.IsZero() {
			break
		}
	}
	require.Equal(t, rest, got)
}

func TestPageRejects(t *testing.T) {
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	for _, limit := range []int{0, -1, 1<<20 + 1} {
		_, _, err := r.Page(context.Background(), "a", subset.Cursor{}, limit)
		require.ErrorIs(t, err, patterns.ErrInvalid, "limit %d", limit)
	}
	_, _, err := r.Page(context.Background(), bson.D{{Key: "$ne", Value: 1}}, subset.Cursor{}, 1)
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

func TestAllRejectsABadParentID(t *testing.T) {
	r := newRepo[parent, item](t, mongotest.DB(t), config(3), portable)
	for _, err := range r.All(context.Background(), "") {
		require.ErrorIs(t, err, patterns.ErrInvalid)
	}
}

// cursorText encodes a document the way a cursor is encoded, to forge
// cursors.
func cursorText(t testing.TB, d bson.D) string {
	t.Helper()
	raw, err := bson.Marshal(d)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestParseCursor(t *testing.T) {
	good := cursorText(t, bson.D{{Key: "s", Value: 5}, {Key: "i", Value: bson.NewObjectID()}})
	c, err := subset.ParseCursor(good)
	require.NoError(t, err)
	require.Equal(t, good, c.String())

	zero, err := subset.ParseCursor("")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
	require.Empty(t, zero.String())

	// As JSON, through MarshalText and UnmarshalText.
	js, err := json.Marshal(struct{ Next subset.Cursor }{c})
	require.NoError(t, err)
	var back struct{ Next subset.Cursor }
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, good, back.Next.String())
	require.Error(t, json.Unmarshal([]byte(`{"Next":"!"}`), &back))

	bad := map[string]string{
		"not base64":                "!!!",
		"not BSON":                  base64.RawURLEncoding.EncodeToString([]byte("hello")),
		"operator as sort value":    cursorText(t, bson.D{{Key: "s", Value: bson.D{{Key: "$gt", Value: 1}}}, {Key: "i", Value: 1}}),
		"operator as id":            cursorText(t, bson.D{{Key: "s", Value: 1}, {Key: "i", Value: bson.D{{Key: "$ne", Value: nil}}}}),
		"regex as id":               cursorText(t, bson.D{{Key: "s", Value: 1}, {Key: "i", Value: bson.Regex{Pattern: "."}}}),
		"null sort value":           cursorText(t, bson.D{{Key: "s", Value: nil}, {Key: "i", Value: 1}}),
		"zero id":                   cursorText(t, bson.D{{Key: "s", Value: 1}, {Key: "i", Value: 0}}),
		"missing id":                cursorText(t, bson.D{{Key: "s", Value: 1}}),
		"extra field":               cursorText(t, bson.D{{Key: "s", Value: 1}, {Key: "i", Value: 1}, {Key: "x", Value: 1}}),
		"fields in the wrong order": cursorText(t, bson.D{{Key: "i", Value: 1}, {Key: "s", Value: 1}}),
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := subset.ParseCursor(text)
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
	}
}

// FuzzParseCursor checks that ParseCursor never panics, that it rejects
// only with ErrInvalid, and that what it accepts survives a round trip
// through its text.
func FuzzParseCursor(f *testing.F) {
	f.Add("")
	f.Add("!!!")
	for _, d := range []bson.D{
		{{Key: "s", Value: 5}, {Key: "i", Value: "x"}},
		{{Key: "s", Value: "b"}, {Key: "i", Value: bson.NewObjectID()}},
		{{Key: "s", Value: bson.D{{Key: "$gt", Value: 1}}}, {Key: "i", Value: 1}},
	} {
		f.Add(cursorText(f, d))
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := subset.ParseCursor(s)
		if err != nil {
			if !errors.Is(err, patterns.ErrInvalid) {
				t.Fatalf("ParseCursor(%q) = %v, not ErrInvalid", s, err)
			}
			return
		}
		again, err := subset.ParseCursor(c.String())
		if err != nil || again.String() != c.String() {
			t.Fatalf("ParseCursor(%q): round trip through %q gives %q, %v", s, c.String(), again.String(), err)
		}
	})
}
