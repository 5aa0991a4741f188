package outlier

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestParentClosesWhenFullInBytes: a parent close to 16 MiB takes the
// items that fit and closes at the first that does not, which goes to
// overflow with those after it; nothing is lost and no document exceeds
// 16 MiB, not even after the close, which marks the parent overflowed
// when it has only a few bytes left. (FerretDB 1.x would store an
// oversized parent: the portable plan sizes each write itself.)
func TestParentClosesWhenFullInBytes(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, _ := newRepo(t, small(), p)
		title := strings.Repeat("t", patterns.MaxDocumentSize-(100<<10))
		_, err := r.Insert(ctx, post{ID: 1, Title: title})
		require.NoError(t, err)
		// The parent's size as stored, without reading its title.
		rest, err := r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: 1}},
			options.FindOne().SetProjection(bson.D{{Key: "title", Value: 0}})).Raw()
		require.NoError(t, err)
		size := len(rest) + 1 + len("title") + 1 + 4 + len(title) + 1

		// a leaves the parent exactly the room of c, which would fit, but
		// comes after b, which does not.
		c := comment{ID: "c"}
		room := elementSize(1, len(must(bson.Marshal(c))))
		a := comment{ID: "a", Text: "x"}
		overhead := elementSize(0, len(must(bson.Marshal(a)))) - len(a.Text)
		a.Text = strings.Repeat("x", patterns.MaxDocumentSize-size-room-overhead)
		require.Equal(t, patterns.MaxDocumentSize-room, size+elementSize(0, len(must(bson.Marshal(a)))))
		b := comment{ID: "b", Text: strings.Repeat("x", 70<<10)}
		require.NoError(t, r.Append(ctx, 1, a, b, c))
		require.NoError(t, r.Append(ctx, 1, comment{ID: "d", Text: "x"}))

		parent, docs := stored(t, r, 1) // the one read of the big parent
		require.LessOrEqual(t, len(parent), patterns.MaxDocumentSize, "the close found room")
		require.Equal(t, []string{"a"}, embedded(t, parent), "the parent closed below N")
		require.True(t, parent.Lookup("has_extra").Boolean())
		var over []string
		for _, d := range docs {
			over = append(over, idsOf(d.Items)...)
		}
		require.Equal(t, []string{"b", "c", "d"}, over)
		require.Equal(t, []string{"a", "b", "c", "d"}, idsOf(take(t, r.Items(ctx, 1), -1)), "Items reads the parent's array, not its title")
	})
}

// TestRoomToClose: the portable plan counts, in a parent's size, what
// writing its flag and tail hint adds (a parent written by other means
// may lack them), so that no push leaves a parent without room to close;
// a parent that has no room for them even empty of new items cannot be
// marked overflowed and Append says so before writing.
func TestRoomToClose(t *testing.T) {
	r, err := New[post, comment](offline, small())
	require.NoError(t, err)
	portable := PlanFor(mongotest.Portable())
	c := comment{ID: "c"}
	elem := elementSize(0, len(must(bson.Marshal(c))))
	flagAndTail := (1 + len("has_extra") + 1 + 1) + (1 + len("extra_tail") + 1 + 8)

	parent := func(title int, fields ...bson.E) bson.Raw {
		doc := append(bson.D{{Key: "_id", Value: 1}, {Key: "comments", Value: bson.A{}}}, fields...)
		base := len(must(bson.Marshal(doc)))
		doc = append(doc, bson.E{Key: "title", Value: strings.Repeat("t", title-base-(1+len("title")+1+4+1))})
		raw := must(bson.Marshal(doc))
		require.Len(t, raw, title)
		return raw
	}
	for _, tc := range []struct {
		name   string
		fields []bson.E
		grows  int
	}{
		{"written by Insert", []bson.E{{Key: "has_extra", Value: false}, {Key: "extra_tail", Value: int64(0)}}, 0},
		{"without the fields", nil, flagAndTail},
		{"with an int32 tail", []bson.E{{Key: "has_extra", Value: false}, {Key: "extra_tail", Value: int32(0)}}, 4},
		{"with a null flag", []bson.E{{Key: "has_extra", Value: nil}}, 1 + (1 + len("extra_tail") + 1 + 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Room for c and what the push adds to the fields: c fits.
			st, err := r.stateOf(portable, parent(patterns.MaxDocumentSize-elem-tc.grows, tc.fields...))
			require.NoError(t, err)
			require.Equal(t, patterns.MaxDocumentSize-elem, st.size)
			require.Equal(t, 1, r.fitParent(st, []item{{raw: must(bson.Marshal(c))}}))
			// One byte less: c does not fit, the parent closes, and the
			// close, which writes the fields, fits.
			st, err = r.stateOf(portable, parent(patterns.MaxDocumentSize-elem-tc.grows+1, tc.fields...))
			require.NoError(t, err)
			require.Zero(t, r.fitParent(st, []item{{raw: must(bson.Marshal(c))}}))
			require.LessOrEqual(t, st.size, patterns.MaxDocumentSize)
		})
	}
}

// TestRoomForAnArray: a parent whose array is null or absent is counted
// with the empty array Append gives it.
func TestRoomForAnArray(t *testing.T) {
	r, err := New[post, comment](offline, small())
	require.NoError(t, err)
	for _, doc := range []bson.D{
		{{Key: "_id", Value: 1}, {Key: "comments", Value: nil}, {Key: "has_extra", Value: false}, {Key: "extra_tail", Value: int64(0)}},
		{{Key: "_id", Value: 1}, {Key: "has_extra", Value: false}, {Key: "extra_tail", Value: int64(0)}},
	} {
		st, err := r.stateOf(PlanFor(mongotest.Portable()), must(bson.Marshal(doc)))
		require.NoError(t, err)
		require.True(t, st.noArray)
		withArray := must(bson.Marshal(append(doc[:1:1], bson.E{Key: "comments", Value: bson.A{}}, doc[len(doc)-2], doc[len(doc)-1])))
		require.Equal(t, len(withArray), st.size)
	}
}

// TestOverflowDocumentsStayUnder16MiB: big items fill overflow documents
// by bytes before they reach M items.
func TestOverflowDocumentsStayUnder16MiB(t *testing.T) {
	ctx := context.Background()
	cfg := small()
	cfg.Cap, cfg.OverflowCap = 1, 10
	r, _ := newPost(t, cfg, PlanFor(mongotest.Portable()))
	big := strings.Repeat("x", 6<<20)
	require.NoError(t, r.Append(ctx, 1, comment{ID: "p"}, comment{ID: "a", Text: big}, comment{ID: "b", Text: big}))
	require.NoError(t, r.Append(ctx, 1, comment{ID: "c", Text: big}, comment{ID: "d"}))

	cur, err := r.overflow.Find(ctx, bson.D{}, options.Find().SetSort(overflowOrder))
	require.NoError(t, err)
	var order []string
	for cur.Next(ctx) {
		require.LessOrEqual(t, len(cur.Current), patterns.MaxDocumentSize)
		var d overflowDoc
		require.NoError(t, cur.Decode(&d))
		require.Equal(t, 2, d.Count, "two 6 MiB items per document, the third opens the next")
		require.LessOrEqual(t, len(cur.Current)-d.Bytes, 100, "bytes accounts for the items")
		order = append(order, idsOf(d.Items)...)
	}
	require.NoError(t, cur.Err())
	require.Equal(t, []string{"a", "b", "c", "d"}, order)
	n, err := r.Count(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 5, n)
}

// TestBudgetOfTheStoredParentID: an overflow document created through
// the parent id int64(1) (8 bytes) and filled to within a few bytes of
// what that leaves, as an Append through int64(1) could fill it; then an
// Append through the id 1 (an int32, 4 bytes: the same parent). The room
// is computed from the widest encoding of a number, not from the id as
// passed, so the item opens a new document instead of taking the first
// past 16 MiB (stored silently on FerretDB 1.x, ErrTooLarge on FerretDB
// 2.x; issue 20 item 8).
func TestBudgetOfTheStoredParentID(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := Config{Parents: "posts", Field: "comments", Cap: 1, OverflowCap: 2}
		r, _ := newRepo(t, cfg, p)
		_, err := r.parents.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1)},
			{Key: "comments", Value: bson.A{comment{ID: "a"}}}, {Key: "has_extra", Value: true}, {Key: "extra_tail", Value: int64(0)}})
		require.NoError(t, err)

		x := comment{ID: "x"}
		s := elementSize(cfg.OverflowCap-1, len(must(bson.Marshal(x))))
		filler := comment{ID: "f", Text: "y"}
		overhead := elementSize(cfg.OverflowCap-1, len(must(bson.Marshal(filler)))) - len(filler.Text)
		// bytes such that x does not fit after the filler with the int64's
		// budget, and would with the int32's (4 bytes more).
		env := must(bson.Marshal(bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: fParent, Value: int64(1)},
			{Key: fSeq, Value: int64(0)}, {Key: fCount, Value: int64(0)}, {Key: fBytes, Value: int64(0)}, {Key: fItems, Value: bson.A{}}}))
		bytes := patterns.MaxDocumentSize - len(env) - s + 2
		filler.Text = strings.Repeat("y", bytes-overhead)
		_, err = r.overflow.InsertOne(ctx, bson.D{{Key: fParent, Value: int64(1)}, {Key: fSeq, Value: int64(0)},
			{Key: fCount, Value: int64(1)}, {Key: fBytes, Value: int64(bytes)}, {Key: fItems, Value: bson.A{filler}}})
		require.NoError(t, err)

		require.NoError(t, r.Append(ctx, 1, x))
		_, docs := stored(t, r, 1)
		require.Equal(t, 2, len(docs), "x opened a new document")
		require.Equal(t, []string{"f"}, idsOf(docs[0].Items))
		require.Equal(t, bytes, docs[0].Bytes, "the first document is as it was")
		require.Equal(t, []string{"x"}, idsOf(docs[1].Items))
	})
}
