package subset_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
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

// TestAllOptions: BatchSize sizes All's pages (a find each, the last
// short), Limit bounds the items yielded, and Skip, which would skip in
// every page, is refused.
func TestAllOptions(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a")
	require.NoError(t, r.Add(ctx, "a", five...))
	c := mongotest.NewCounter(t, db)
	var got []item
	require.Equal(t, []string{"find", "find"}, c.Count(func() {
		for it, err := range r.All(ctx, "a", options.Find().SetBatchSize(2).SetLimit(3)) {
			require.NoError(t, err)
			got = append(got, it)
		}
	}))
	require.Equal(t, withParentIn("a", ranked(five)[:3]), got)
	require.Equal(t, []string{"find", "find", "find"}, c.Count(func() {
		for _, err := range r.All(ctx, "a", options.Find().SetBatchSize(2)) {
			require.NoError(t, err)
		}
	}), "pages of 2, 2 and 1")
	for _, err := range r.All(ctx, "a", options.Find().SetSkip(1)) {
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorContains(t, err, `subset: All: parent "a": `)
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

// anyItem has an id and a sort value of any scalar BSON type.
type anyItem struct {
	ID     any    `bson:"_id"`
	Parent string `bson:"parent,omitempty"`
	Score  any    `bson:"score"`
}

// walkPages reads every page of the parent with the given limit.
func walkPages[I any](t *testing.T, r *subset.Repo[bson.M, I], parentID string, limit int) []I {
	t.Helper()
	var got []I
	var after subset.Cursor
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "Page does not end")
		page, next, err := r.Page(context.Background(), parentID, after, limit)
		require.NoError(t, err)
		got = append(got, page...)
		if next.IsZero() {
			return got
		}
		require.NotEmpty(t, page, "a page before a non-zero cursor is not empty")
		after = next
	}
}

// allOf reads every item of the parent through All.
func allOf[I any](t *testing.T, r *subset.Repo[bson.M, I], parentID string) []I {
	t.Helper()
	var out []I
	for it, err := range r.All(context.Background(), parentID) {
		require.NoError(t, err)
		out = append(out, it)
	}
	return out
}

// TestPageWalksWhatAllYields: Page walks the items that All yields, in
// All's order, whatever the BSON types of their ids and sort values: the
// range operators of the page's filter compare values of one type only,
// so the filter must reach the types that come later in the server's
// sort order.
func TestPageWalksWhatAllYields(t *testing.T) {
	ctx := context.Background()
	date := bson.NewDateTimeFromTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	// Every id and sort type the repository accepts, in the server's
	// type order: numbers, strings, binary data, ObjectIDs, booleans,
	// dates, timestamps.
	ids := []any{int64(1), 2.5, int32(3), "x", "y", bson.Binary{Data: []byte{1}}, bson.NewObjectID(), true, date, bson.Timestamp{T: 5, I: 1}}
	scores := []any{int64(10), "a", bson.Binary{Data: []byte{2}}, bson.NewObjectID(), false, date, bson.Timestamp{T: 1, I: 1}}
	cases := map[string][]anyItem{}
	for _, id := range ids { // ids of every type, tied on the sort value
		cases["ids of every type"] = append(cases["ids of every type"], anyItem{ID: id, Score: int64(10)})
	}
	for i, s := range scores { // sort values of every type, two items each
		cases["sort values of every type"] = append(cases["sort values of every type"],
			anyItem{ID: int64(2*i + 1), Score: s}, anyItem{ID: fmt.Sprint("id", i), Score: s})
	}
	for name, items := range cases {
		for _, descending := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/descending=%v", name, descending), func(t *testing.T) {
				db := mongotest.DB(t)
				cfg := config(3)
				cfg.Descending = descending
				r := newRepo[bson.M, anyItem](t, db, cfg, portable)
				insertParents(t, db, "a", "b")
				require.NoError(t, r.Add(ctx, "a", items...))
				require.NoError(t, r.Add(ctx, "b", anyItem{ID: "other", Score: int64(10)}))
				want := allOf(t, r, "a")
				require.Len(t, want, len(items))
				for _, limit := range []int{1, 2, 3} {
					require.Equal(t, want, walkPages(t, r, "a", limit), "limit %d", limit)
				}
			})
		}
	}
}

// TestNaNIsNotASortValue: range operators never match NaN, so a page
// after a NaN, or before one, would skip items; the repository refuses NaN
// as a sort value, in items and in cursors, and writes nothing.
func TestNaNIsNotASortValue(t *testing.T) {
	ctx := context.Background()
	nan, err := bson.ParseDecimal128("NaN")
	require.NoError(t, err)
	for name, v := range map[string]any{"double": math.NaN(), "decimal": nan} {
		t.Run(name, func(t *testing.T) {
			db := mongotest.DB(t)
			r := newRepo[bson.M, anyItem](t, db, config(3), portable)
			insertParents(t, db, "a")
			err := r.Add(ctx, "a", anyItem{ID: int64(1), Score: v}, anyItem{ID: int64(2), Score: 5.0})
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.Zero(t, count(t, db.Collection("items"), bson.D{}), "nothing written")

			require.NoError(t, r.Add(ctx, "a", anyItem{ID: int64(2), Score: 5.0}))
			require.ErrorIs(t, r.Update(ctx, "a", anyItem{ID: int64(2), Score: v}), patterns.ErrInvalid)
			require.Equal(t, []anyItem{{ID: int64(2), Parent: "a", Score: 5.0}}, allOf(t, r, "a"), "the item is untouched")

			_, err = subset.ParseCursor(cursorText(t, bson.D{{Key: "s", Value: v}, {Key: "i", Value: 1}}))
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
	}
}

// TestPageStopsAtAStoredNaN: an item stored without the repository with
// a NaN sort value stops Page with an error when a page ends on it, rather
// than a page that silently skips the items after it.
func TestPageStopsAtAStoredNaN(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	cfg := config(3)
	cfg.Descending = false
	r := newRepo[bson.M, anyItem](t, db, cfg, portable)
	insertParents(t, db, "a")
	_, err := db.Collection("items").InsertMany(ctx, []any{
		anyItem{ID: int64(1), Parent: "a", Score: math.NaN()},
		anyItem{ID: int64(2), Parent: "a", Score: math.NaN()},
		anyItem{ID: int64(3), Parent: "a", Score: 5.0},
		anyItem{ID: int64(4), Parent: "a", Score: int32(7)},
	})
	if mongo.IsNetworkError(err) {
		t.Skipf("skipped: the server does not store NaN, it closes the connection (%v)", err)
	}
	require.NoError(t, err)
	_, _, err = r.Page(ctx, "a", subset.Cursor{}, 1)
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot continue after item 1")
}

// TestAllYieldsEachItemOnceWhileOthersWrite lists a parent's items with
// All, in pages of 4, while the items are rewritten: as each item is
// yielded, it and an item further on are replaced by Update with the same
// score and a body 512 bytes longer (a cursor over the documents may return
// a rewritten one again: FerretDB 2.x's does), and every fifth item an
// item further on is removed and a new one added. Every item that was
// neither removed nor added appears once, in the configured order; no
// item appears twice.
func TestAllYieldsEachItemOnceWhileOthersWrite(t *testing.T) {
	ctx := context.Background()
	n := mongotest.Scale(150, 12)
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), subset.PlanFor(mongotest.Server()))
	insertParents(t, db, "a")
	var items []item
	for i := range n {
		items = append(items, item{ID: int64(i + 1), Score: int64(i % 7)})
	}
	require.NoError(t, r.Add(ctx, "a", items...))
	order := stored(t, r, "a")
	require.Len(t, order, n)

	grown := func(it item) item {
		it.Body += strings.Repeat("x", 512)
		return it
	}
	inFlux := map[int64]bool{} // removed or added while All runs
	seen := map[int64]int{}
	var got []item
	next := int64(n + 1)
	for it, err := range r.All(ctx, "a", options.Find().SetBatchSize(4)) {
		require.NoError(t, err)
		seen[it.ID]++
		got = append(got, it)
		k := len(got) - 1
		if !inFlux[it.ID] { // a removed item may come from a page read before
			require.NoError(t, r.Update(ctx, "a", grown(it)), "rewrite the item just yielded")
		}
		if k+3 < n && !inFlux[order[k+3].ID] {
			require.NoError(t, r.Update(ctx, "a", grown(order[k+3])), "rewrite an item further on")
		}
		if k%5 == 0 && k+5 < n && !inFlux[order[k+5].ID] {
			gone := order[k+5].ID
			inFlux[gone] = true
			require.NoError(t, r.Remove(ctx, "a", gone))
			added := item{ID: next, Score: next % 7}
			inFlux[added.ID] = true
			next++
			require.NoError(t, r.Add(ctx, "a", added))
		}
	}
	for id, times := range seen {
		require.Equal(t, 1, times, "item %d yielded once", id)
	}
	for _, it := range order {
		if !inFlux[it.ID] {
			require.Equal(t, 1, seen[it.ID], "item %d, stored throughout, yielded once", it.ID)
		}
	}
	require.True(t, slices.IsSortedFunc(got, func(a, b item) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(b.ID, a.ID))
	}), "in the configured order")
	mongotest.Detail(t, "%d items yielded of %d stored at the start; %d removed or added meanwhile", len(got), n, len(inFlux))
}

// TestPageNeverSkipsAStoredItem: items stored without the repository
// with a sort value of each class of the server's sort order (bsonkinds:
// missing, null, the NaNs, infinities, numbers of each type, strings and
// symbols, documents, arrays, binary data, ObjectIDs, booleans, dates,
// timestamps, MinKey, undefined, regular expressions, JavaScript with and
// without scope, DBPointer, MaxKey), among numbers: in both directions
// and pages of several sizes, Page and All yield every item once, in the
// order the server sorts them, or stop with an error wrapping
// patterns.ErrInvalid that names an item; never fewer items in silence.
// (Descending, NaN and missing sort after every number: the page after a
// number once matched neither; symbols, MinKey and undefined were skipped
// in both directions, the types the common $type aliases do not name.) A
// value the server does not store (FerretDB 1.x stores few of the odd
// types) is left out with its parent.
func TestPageNeverSkipsAStoredItem(t *testing.T) {
	t.Parallel() // beside TestFaults, which waits on its stalls
	ctx := context.Background()
	// The values the server stores, tried once: FerretDB 1.x refuses a
	// Decimal128 by closing the connection, which costs half a second,
	// through a client of its own: a closed connection clears its
	// client's pool, which would fail the commands that the tests beside
	// this one send through the shared client.
	var classes []bsonkinds.Value
	probe := mongotest.NewClient(t).Database(mongotest.DB(t).Name()).Collection("probe")
	for i, v := range bsonkinds.All() {
		if _, err := probe.InsertOne(ctx, v.Doc("score", bson.E{Key: "_id", Value: i})); err != nil {
			mongotest.Detail(t, "score %s left out: the server does not store it (%v)", v.Name, err)
			continue
		}
		classes = append(classes, v)
	}
	for _, descending := range []bool{false, true} {
		t.Run(fmt.Sprintf("descending=%v", descending), func(t *testing.T) {
			db := mongotest.DB(t)
			cfg := config(3)
			cfg.Descending = descending
			r := newRepo[bson.M, anyItem](t, db, cfg, portable)
			id := int64(0)
			insert := func(parent string, score bsonkinds.Value) bool {
				id++
				_, err := db.Collection("items").InsertOne(ctx, score.Doc("score", bson.E{Key: "_id", Value: id}, bson.E{Key: "parent", Value: parent}))
				if err != nil { // FerretDB 2.7 stores JavaScript with scope in probe, not in the indexed items
					mongotest.Detail(t, "score %s left out: the server does not store it here (%v)", score.Name, err)
				}
				return err == nil
			}
			number := func() bsonkinds.Value {
				return bsonkinds.Value{V: bson.RawValue{Type: bson.TypeInt64, Value: bsoncore.AppendInt64(nil, id)}}
			}
			// Parent "all" holds every value, a number after each, for
			// pages to end on; parent "pK" value K alone after three
			// numbers, so that no other odd value hides it.
			parents := []string{"all"}
			for k, v := range classes {
				if !insert("all", v) {
					continue
				}
				insert("all", number())
				parent := fmt.Sprint("p", k)
				parents = append(parents, parent)
				for range 3 {
					insert(parent, number())
				}
				insert(parent, v)
			}
			insertParents(t, db, parents...)
			walkEveryWay(t, db, r, "all", descending, 1, 2, 3, 5)
			for _, parent := range parents[1:] {
				walkEveryWay(t, db, r, parent, descending, 1, 3)
			}
		})
	}
}

// walkEveryWay walks the parent's items through Page and All, in pages
// of each of the limits: each walk yields the items in the order the server
// sorts them, every one of them or a prefix followed by the error that
// names the item Page cannot continue after.
func walkEveryWay(t *testing.T, db *mongo.Database, r *subset.Repo[bson.M, anyItem], parent string, descending bool, limits ...int) {
	t.Helper()
	ctx := context.Background()
	dir := 1
	if descending {
		dir = -1
	}
	cur, err := db.Collection("items").Find(ctx, bson.D{{Key: "parent", Value: parent}},
		options.Find().SetSort(bson.D{{Key: "score", Value: dir}, {Key: "_id", Value: dir}}))
	require.NoError(t, err)
	var stored []anyItem
	require.NoError(t, cur.All(ctx, &stored))
	want := make([]any, len(stored))
	for i, it := range stored {
		want[i] = it.ID
	}
	for _, limit := range limits {
		var got []any
		var after subset.Cursor
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "Page does not end")
			page, next, err := r.Page(ctx, parent, after, limit)
			if err != nil {
				require.ErrorIs(t, err, patterns.ErrInvalid, "limit %d", limit)
				require.ErrorContains(t, err, "item", "limit %d", limit)
				break
			}
			for _, it := range page {
				got = append(got, it.ID)
			}
			if next.IsZero() {
				require.Equal(t, want, got, "%s, limit %d: every item, in order", parent, limit)
				break
			}
			after = next
		}
		require.Equal(t, want[:len(got)], append([]any{}, got...), "%s, limit %d: the items yielded, in order", parent, limit)

		got = got[:0]
		var allErr error
		for it, err := range r.All(ctx, parent, options.Find().SetBatchSize(int32(limit))) {
			if err != nil {
				allErr = err
				break
			}
			got = append(got, it.ID)
		}
		if allErr != nil {
			require.ErrorIs(t, allErr, patterns.ErrInvalid, "All, pages of %d", limit)
			require.ErrorContains(t, allErr, "item", "All, pages of %d", limit)
			require.Equal(t, want[:len(got)], append([]any{}, got...), "All, pages of %d: the items yielded, in order", limit)
		} else {
			require.Equal(t, want, got, "%s, All, pages of %d: every item, in order", parent, limit)
		}
	}
}
