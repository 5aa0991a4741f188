package doctor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestParseKeyComparesDirectionsByValue(t *testing.T) {
	for _, v := range []any{1, int64(1), 1.0, int32(1)} {
		require.Equal(t, []keyField{{Path: "a", Dir: 1}}, key("a", v), "%T %v", v, v)
	}
	// Ascending or descending, but another key value than 1 or -1.
	for _, v := range []any{0.5, 2, int64(2)} {
		require.Equal(t, []keyField{{Path: "a", Dir: 1, Scaled: true}}, key("a", v), "%T %v", v, v)
	}
	require.Equal(t, []keyField{{Path: "a", Dir: -1, Scaled: true}}, key("a", -2.5))
	for _, v := range []any{-1, int64(-1), -1.0} {
		require.Equal(t, []keyField{{Path: "a", Dir: -1}}, key("a", v))
	}
	require.Equal(t, []keyField{{Path: "a", Kind: "hashed"}, {Path: "$**", Kind: "wildcard"}}, key("a", "hashed", "$**", 1))
	raw, _ := bson.Marshal(d("a", 0))
	_, err := parseKey(raw)
	require.Error(t, err)
}

func TestRedundantIndexes(t *testing.T) {
	spec := func(name string, k []keyField, mod ...func(*indexSpec)) indexSpec {
		s := indexSpec{Name: name, Key: k}
		for _, m := range mod {
			m(&s)
		}
		return s
	}
	unique := func(s *indexSpec) { s.Unique = true }
	sparse := func(s *indexSpec) { s.Sparse = true }
	partial := func(s *indexSpec) { s.Partial = bson.Raw{5, 0, 0, 0, 0} }
	collation := func(s *indexSpec) { s.Collation, _ = bson.Marshal(d("locale", "fr")) }
	for _, tc := range []struct {
		name  string
		specs []indexSpec
		want  []string // redundant index names
	}{
		{"prefix", []indexSpec{spec("a_1", key("a", 1)), spec("a_1_b_1", key("a", 1, "b", 1))}, []string{"a_1"}},
		{"prefix with all directions reversed", []indexSpec{spec("a_1_b_-1", key("a", 1, "b", -1)), spec("x", key("a", -1, "b", 1, "c", 1))}, []string{"a_1_b_-1"}},
		{"mixed reversal is not a prefix", []indexSpec{spec("a_1_b_1", key("a", 1, "b", 1)), spec("x", key("a", 1, "b", -1, "c", 1))}, nil},
		{"not a prefix", []indexSpec{spec("b_1", key("b", 1)), spec("a_1_b_1", key("a", 1, "b", 1))}, nil},
		{"the _id index", []indexSpec{spec("_id_", key("_id", 1)), spec("_id_1_a_1", key("_id", 1, "a", 1))}, nil},
		{"a unique prefix enforces a constraint", []indexSpec{spec("a_1", key("a", 1), unique), spec("a_1_b_1", key("a", 1, "b", 1))}, nil},
		{"a sparse longer index misses documents", []indexSpec{spec("a_1", key("a", 1)), spec("a_1_b_1", key("a", 1, "b", 1), sparse)}, nil},
		{"a partial longer index misses documents", []indexSpec{spec("a_1", key("a", 1)), spec("a_1_b_1", key("a", 1, "b", 1), partial)}, nil},
		{"another collation", []indexSpec{spec("a_1", key("a", 1)), spec("a_1_b_1", key("a", 1, "b", 1), collation)}, nil},
		{"a hashed index is no prefix", []indexSpec{spec("a_hashed", key("a", "hashed")), spec("a_1_b_1", key("a", 1, "b", 1))}, nil},
		{"the same key twice is not a prefix", []indexSpec{spec("a_1", key("a", 1)), spec("a_1_fr", key("a", 1), collation)}, nil},
	} {
		var got []string
		for _, f := range redundantIndexes("c", tc.specs) {
			require.Equal(t, RuleRedundantIndex, f.Rule)
			got = append(got, f.Index)
		}
		require.Equal(t, tc.want, got, tc.name)
	}
}

func TestTooManyIndexesAndMultikeyCompound(t *testing.T) {
	th, _ := Thresholds{Indexes: 2}.withDefaults()
	specs := []indexSpec{{Name: "_id_", Key: key("_id", 1)}, {Name: "t_s", Key: key("tags", 1, "sizes.v", 1)}, {Name: "t_n", Key: key("tags", 1, "name", 1)}}
	fs := tooManyIndexes("c", specs, th)
	require.Len(t, fs, 1)
	n, _ := fs[0].Evidence.Get("indexes")
	require.Equal(t, 3, n)
	require.Empty(t, tooManyIndexes("c", specs[:2], th))

	p := newProfile(th)
	add := func(doc bson.D) {
		raw, err := bson.Marshal(doc)
		require.NoError(t, err)
		require.NoError(t, p.add(raw))
	}
	add(d("tags", bson.A{"a"}, "sizes", d("v", 1), "name", "x"))
	add(d("tags", "b", "sizes", bson.A{d("v", 1), d("v", 2)}, "name", "y"))
	fs = multikeyCompound("c", specs, p)
	require.Len(t, fs, 1, "sizes.v is multikey through its parent array")
	require.Equal(t, "t_s", fs[0].Index)
	require.Equal(t, "tags, sizes.v", fs[0].Field)
	of, _ := fs[0].Evidence.Get("arrayOf.sizes.v")
	require.Equal(t, "sizes", of)
}

// TestMultikeyCompoundComparesArrays: MongoDB refuses only an index over
// two different arrays; fields of one array's elements, or of arrays
// nested in one another, share an index (its manual's example of a valid
// compound multikey index is {"ratings.score": 1, "ratings.by": 1}).
func TestMultikeyCompoundComparesArrays(t *testing.T) {
	th, _ := Thresholds{}.withDefaults()
	p := newProfile(th)
	for _, doc := range []bson.D{
		d("items", bson.A{d("sku", "a", "qty", 1, "sizes", bson.A{"S", "M"}, "colors", bson.A{"red"})}, "tags", bson.A{"x"}, "n", 1),
		d("items", bson.A{d("sku", "b", "qty", 2)}, "tags", "y", "n", 2),
		d("line", d("items", bson.A{d("sku", "c")}, "codes", bson.A{1, 2}), "n", 3),
	} {
		raw, err := bson.Marshal(doc)
		require.NoError(t, err)
		require.NoError(t, p.add(raw))
	}
	for _, tc := range []struct {
		key  []keyField
		want string // the fields reported, "" for none
	}{
		{key("items.sku", 1, "items.qty", 1), ""},
		{key("items.sku", 1, "items.qty", -1, "n", 1), ""},
		{key("items", 1, "items.sku", 1), ""},
		{key("items.sku", 1, "items.sizes", 1), "" /* sizes is inside the items array */},
		{key("items", 1, "items.sizes", 1), ""},
		{key("line.items.sku", 1, "line.n", 1), ""},
		{key("items.sku", 1, "tags", 1), "items.sku, tags"},
		{key("items.sizes", 1, "items.colors", 1), "items.sizes, items.colors"},
		{key("items.sku", 1, "items.sizes", 1, "items.colors", 1), "items.sizes, items.colors"},
		{key("line.items.sku", 1, "line.codes", 1), "line.items.sku, line.codes"},
		{key("tags", 1, "n", 1), ""},
	} {
		fs := multikeyCompound("c", []indexSpec{{Name: keyString(tc.key), Key: tc.key}}, p)
		if tc.want == "" {
			require.Empty(t, fs, "%s", keyString(tc.key))
			continue
		}
		require.Len(t, fs, 1, "%s", keyString(tc.key))
		require.Equal(t, tc.want, fs[0].Field, "%s", keyString(tc.key))
	}
}

func TestUnusedIndexes(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	ttl := int64(60)
	specs := []indexSpec{
		{Name: "_id_", Key: key("_id", 1)},
		{Name: "a_1", Key: key("a", 1)},
		{Name: "b_1", Key: key("b", 1)},
		{Name: "u_1", Key: key("u", 1), Unique: true},
		{Name: "t_1", Key: key("t", 1), TTL: &ttl},
		{Name: "h_1", Key: key("h", 1), Hidden: true},
		{Name: "young_1", Key: key("y", 1)},
	}
	old := now.Add(-30 * 24 * time.Hour)
	uses := map[string]indexUse{
		"_id_": {0, old}, "a_1": {0, old}, "b_1": {12, old}, "u_1": {0, old}, "t_1": {0, old}, "h_1": {0, old},
		"young_1": {0, now.Add(-time.Hour)},
	}
	fs, skips := unusedIndexes("c", specs, uses, now, DefaultUnusedIndexAge)
	require.Len(t, fs, 1)
	require.Equal(t, "a_1", fs[0].Index)
	days, _ := fs[0].Evidence.Get("days")
	require.Equal(t, 30.0, days)
	require.Len(t, skips, 1)
	require.Equal(t, RuleUnusedIndex, skips[0].Rule)
	require.Contains(t, skips[0].Reason, "young_1")
}

// TestUnusedIndexesSayTheWindowOnce: 40 indexes whose counters started
// at the server's last start give one line that names them all and says
// the window once, not once per index (issue 22).
func TestUnusedIndexesSayTheWindowOnce(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	restart, created := now.Add(-48*time.Hour), now.Add(-time.Hour)
	var specs []indexSpec
	uses := map[string]indexUse{}
	var names []string
	for i := range 40 {
		name := fmt.Sprintf("attr_%02d_1", i)
		specs = append(specs, indexSpec{Name: name, Key: key(fmt.Sprintf("attr_%02d", i), 1)})
		uses[name] = indexUse{0, restart}
		names = append(names, name)
	}
	specs = append(specs, indexSpec{Name: "new_1", Key: key("new", 1)})
	uses["new_1"] = indexUse{0, created}
	fs, skips := unusedIndexes("c", specs, uses, now, DefaultUnusedIndexAge)
	require.Empty(t, fs)
	require.Len(t, skips, 1)
	reason := skips[0].Reason
	require.Equal(t, 2, strings.Count(reason, "counters since"), "once per start of the counters: %s", reason)
	require.Contains(t, reason, strings.Join(names, ", ")+" (counters since 2026-05-30T00:00:00Z); new_1 (counters since 2026-05-31T23:00:00Z)")
	require.Less(t, len(reason), 800)
}

func TestWantIndexDifferences(t *testing.T) {
	w := func(m mongo.IndexModel) wantIndex {
		x, err := wantOf(m)
		require.NoError(t, err)
		return x
	}
	have := func(doc bson.D) indexSpec {
		raw, err := bson.Marshal(doc)
		require.NoError(t, err)
		s, err := parseIndex(raw)
		require.NoError(t, err)
		return s
	}
	plain := w(mongo.IndexModel{Keys: d("a", 1, "b", -1)})
	k, text := plain.serverKey()
	require.Nil(t, text)
	require.Equal(t, "a_1_b_-1", plain.name())
	require.Equal(t, k, have(d("name", "x", "key", d("a", 1.0, "b", int64(-1)))).Key, "directions compared by value")
	require.Empty(t, plain.differences(have(d("name", "x", "key", d("a", 1, "b", -1))), nil))
	require.Len(t, plain.differences(have(d("name", "x", "key", d("a", 1, "b", -1), "unique", true)), nil), 1)

	uniq := w(mongo.IndexModel{Keys: d("a", 1), Options: options.Index().SetUnique(true).SetName("by_a")})
	require.Equal(t, "by_a", uniq.name())
	require.Contains(t, uniq.differences(have(d("key", d("a", 1))), nil)[0], "unique: declared true, found false")

	ttl := w(mongo.IndexModel{Keys: d("at", 1), Options: options.Index().SetExpireAfterSeconds(3600)})
	require.Empty(t, ttl.differences(have(d("key", d("at", 1), "expireAfterSeconds", 3600.0)), nil))
	require.Len(t, ttl.differences(have(d("key", d("at", 1), "expireAfterSeconds", 60)), nil), 1)
	require.Len(t, ttl.differences(have(d("key", d("at", 1))), nil), 1)

	partial := w(mongo.IndexModel{Keys: d("a", 1), Options: options.Index().SetPartialFilterExpression(d("n", d("$gt", 5)))})
	require.Empty(t, partial.differences(have(d("key", d("a", 1), "partialFilterExpression", d("n", d("$gt", int64(5))))), nil), "numbers compared by value")
	require.Len(t, partial.differences(have(d("key", d("a", 1), "partialFilterExpression", d("n", d("$gt", 6)))), nil), 1)
	require.Len(t, partial.differences(have(d("key", d("a", 1))), nil), 1)
	require.Len(t, plain.differences(have(d("key", d("a", 1, "b", -1), "partialFilterExpression", d("n", 1))), nil), 1)

	coll := w(mongo.IndexModel{Keys: d("name", 1), Options: options.Index().SetCollation(&options.Collation{Locale: "en", Strength: 2})})
	require.Empty(t, coll.differences(have(d("key", d("name", 1), "collation", d("locale", "en", "strength", 2))), nil))
	require.Len(t, coll.differences(have(d("key", d("name", 1), "collation", d("locale", "en", "strength", 3))), nil), 1)
	require.Len(t, coll.differences(have(d("key", d("name", 1))), nil), 1)

	require.Len(t, plain.differences(have(d("key", d("a", 1, "b", -1), "hidden", true)), nil), 1, "a hidden index serves no query")

	txt := w(mongo.IndexModel{Keys: d("title", "text", "body", "text")})
	k, text = txt.serverKey()
	require.Equal(t, []keyField{{Path: "_fts", Kind: "text"}, {Path: "_ftsx", Dir: 1}}, k)
	require.Equal(t, []string{"title", "body"}, text)
	server := have(d("key", d("_fts", "text", "_ftsx", 1), "weights", d("body", 1, "title", 1)))
	require.Equal(t, k, server.Key)
	require.Empty(t, txt.differences(server, text))
	require.Len(t, txt.differences(have(d("key", d("_fts", "text", "_ftsx", 1), "weights", d("title", 1))), text), 1)

	for _, bad := range []mongo.IndexModel{{}, {Keys: map[string]int{"a": 1, "b": 1}}, {Keys: d("a", 0)}, {Keys: 5}} {
		_, err := wantOf(bad)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%v", bad.Keys)
	}
	_, err := wantOf(mongo.IndexModel{Keys: map[string]int{"a": 1}})
	require.NoError(t, err, "a map of one field has one order")
}
