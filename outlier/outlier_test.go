package outlier

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

type post struct {
	ID    int    `bson:"_id"`
	Title string `bson:"title"`
}

type comment struct {
	ID   string `bson:"_id"`
	Text string `bson:"text,omitempty"`
}

// newRepo builds a repository in a fresh database, creates its indexes
// and forces the plan.
func newRepo(t testing.TB, cfg Config, p Plan) (*Repo[post, comment], *mongo.Database) {
	t.Helper()
	db := mongotest.DB(t)
	r, err := New[post, comment](db, cfg)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(context.Background(), r.Indexes()...))
	ForcePlan(r, p)
	return r, db
}

// appendPlans runs test per plan (mongotest.RunPlans) and, where the
// server's own plan reads the parent before each push (it lacks
// patterns.FeatureUpdateSizeLimit), once more with the pushes of the
// native plan: tests that never come near 16 MiB do not depend on the
// server's size check, so the native plan's Append logic (the optimistic
// push, its guards under concurrency) runs on every server.
func appendPlans(t *testing.T, test func(t *testing.T, p Plan)) {
	t.Helper()
	runAppendPlans(t, false, test)
}

// appendPlansAtOnce is appendPlans with the optimistic run beside the
// server's own plans rather than after them, for tests that spend their
// time waiting (the fault tests).
func appendPlansAtOnce(t *testing.T, test func(t *testing.T, p Plan)) {
	t.Helper()
	runAppendPlans(t, true, test)
}

func runAppendPlans(t *testing.T, atOnce bool, test func(t *testing.T, p Plan)) {
	t.Helper()
	var wg sync.WaitGroup
	run := func(f func()) {
		if atOnce {
			wg.Go(f) // t.Run may be called from several goroutines
		} else {
			f()
		}
	}
	run(func() { mongotest.RunPlans(t, PlanFor, test) })
	if own := PlanFor(mongotest.Server()); !own.serverSizeLimit {
		run(func() {
			t.Run("optimistic", func(t *testing.T) {
				p := own
				p.serverSizeLimit = true
				test(t, p)
			})
		})
	}
	wg.Wait()
}

// newPost is newRepo with a first parent, post 1, inserted.
func newPost(t testing.TB, cfg Config, p Plan) (*Repo[post, comment], *mongo.Database) {
	t.Helper()
	r, db := newRepo(t, cfg, p)
	_, err := r.Insert(context.Background(), post{ID: 1})
	require.NoError(t, err)
	return r, db
}

// small is the configuration of most tests: N=3, M=2.
func small() Config {
	return Config{Parents: "posts", Field: "comments", Cap: 3, OverflowCap: 2}
}

func comments(prefix string, from, to int) []comment {
	var out []comment
	for i := from; i < to; i++ {
		out = append(out, comment{ID: fmt.Sprintf("%s%02d", prefix, i)})
	}
	return out
}

func idsOf(cs []comment) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// overflowDoc is an overflow document as stored.
type overflowDoc struct {
	Parent int       `bson:"parent"`
	Seq    int64     `bson:"seq"`
	Count  int       `bson:"count"`
	Bytes  int       `bson:"bytes"`
	Items  []comment `bson:"items"`
}

// stored returns the raw parent and the overflow documents by seq.
func stored(t testing.TB, r *Repo[post, comment], id int) (bson.Raw, []overflowDoc) {
	t.Helper()
	ctx := context.Background()
	parent, err := r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	require.NoError(t, err)
	cur, err := r.overflow.Find(ctx, bson.D{{Key: fParent, Value: id}}, options.Find().SetSort(overflowOrder))
	require.NoError(t, err)
	var docs []overflowDoc
	require.NoError(t, cur.All(ctx, &docs))
	return parent, docs
}

func embedded(t testing.TB, parent bson.Raw) []string {
	t.Helper()
	var p struct {
		Comments []comment `bson:"comments"`
	}
	require.NoError(t, bson.Unmarshal(parent, &p))
	return idsOf(p.Comments)
}

func TestUnderCap(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := small()
		cfg.Cap = 50
		r, db := newRepo(t, cfg, p)
		_, err := r.Insert(ctx, post{ID: 1, Title: "normal"})
		require.NoError(t, err)
		counter := mongotest.NewCounter(t, db)

		cmds := counter.Count(func() { require.NoError(t, r.Append(ctx, 1, comments("c", 0, 3)...)) })
		if p.serverSizeLimit {
			require.Equal(t, []string{"update"}, cmds, "one guarded push")
		} else {
			require.Equal(t, []string{"find", "update"}, cmds, "read to size the push, then push")
		}
		require.NoError(t, r.Append(ctx, 1, comment{ID: "c03", Text: "fourth"}))

		var got post
		var items []comment
		cmds = counter.Count(func() { got, items, err = r.Get(ctx, 1) })
		require.NoError(t, err)
		require.Equal(t, []string{"find"}, cmds, "a parent under N is one command")
		require.Equal(t, post{ID: 1, Title: "normal"}, got)
		require.Equal(t, []string{"c00", "c01", "c02", "c03"}, idsOf(items))
		require.Equal(t, "fourth", items[3].Text)

		cmds = counter.Count(func() {
			n, err := r.Count(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, 4, n)
		})
		require.Equal(t, []string{"find"}, cmds)

		parent, docs := stored(t, r, 1)
		require.False(t, parent.Lookup("has_extra").Boolean(), "the flag is false")
		require.Empty(t, docs, "no overflow document")
		n, err := db.Collection("posts_overflow").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestOverflowInOrder(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, db := newPost(t, small(), p)
		want := comments("c", 0, 13)
		// One at a time, then a batch crossing documents.
		for _, c := range want[:4] {
			require.NoError(t, r.Append(ctx, 1, c))
		}
		require.NoError(t, r.Append(ctx, 1, want[4:11]...))
		counter := mongotest.NewCounter(t, db)
		// want[11] opens overflow document 4; want[12] joins it.
		opening := counter.Count(func() { require.NoError(t, r.Append(ctx, 1, want[11])) })
		joining := counter.Count(func() { require.NoError(t, r.Append(ctx, 1, want[12])) })
		if p.serverSizeLimit {
			require.Equal(t, []string{"update", "find", "find", "update"}, joining, "failed push, parent state, tail lookup, push")
		} else {
			require.Equal(t, []string{"find", "find", "update"}, joining, "parent, tail lookup, push")
		}
		require.Equal(t, append(joining[:len(joining)-1:len(joining)-1], "update", "update"), opening, "opening: the parent's flag and tail, then the upsert")

		parent, docs := stored(t, r, 1)
		require.Equal(t, []string{"c00", "c01", "c02"}, embedded(t, parent))
		require.True(t, parent.Lookup("has_extra").Boolean())
		require.Equal(t, int64(4), parent.Lookup("extra_tail").Int64())
		var over []string
		for i, d := range docs {
			require.Equal(t, int64(i), d.Seq)
			require.Equal(t, 1, d.Parent)
			require.Equal(t, len(d.Items), d.Count)
			require.LessOrEqual(t, d.Count, 2)
			over = append(over, idsOf(d.Items)...)
		}
		require.Equal(t, idsOf(want[3:]), over)
		require.Len(t, docs, 5)
		require.Equal(t, 2, docs[4].Count)

		var items []comment
		var err error
		cmds := counter.Count(func() { _, items, err = r.Get(ctx, 1) })
		require.NoError(t, err)
		require.Equal(t, []string{"find", "find"}, cmds, "an outlier is two commands")
		require.Equal(t, idsOf(want), idsOf(items))

		cmds = counter.Count(func() {
			n, err := r.Count(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, 13, n)
		})
		require.Equal(t, []string{"find", "aggregate"}, cmds)

		var streamed []string
		for c, err := range r.Items(ctx, 1) {
			require.NoError(t, err)
			streamed = append(streamed, c.ID)
		}
		require.Equal(t, idsOf(want), streamed)
	})
}

func TestRetrySafe(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, _ := newPost(t, small(), p)
		all := comments("c", 0, 9)

		// A first attempt stored c00..c01 (in the parent) then failed.
		require.NoError(t, r.Append(ctx, 1, all[:2]...))
		require.NoError(t, r.Append(ctx, 1, all[:5]...), "the retry")
		// A later attempt stored c05..c06 (in overflow) then failed.
		require.NoError(t, r.Append(ctx, 1, all[5:7]...))
		require.NoError(t, r.Append(ctx, 1, all[5:9]...), "the retry")
		require.NoError(t, r.Append(ctx, 1, all...), "everything again: nothing to do")

		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, idsOf(all), idsOf(items), "each item once, in order")
	})
}

func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	r, _ := newPost(t, small(), PlanFor(mongotest.Portable()))
	require.NoError(t, r.Append(ctx, 1, comment{ID: "keep"}))

	for _, id := range []any{nil, 0, "", bson.M{"$ne": nil}, bson.D{{Key: "$gt", Value: 0}}, bson.Regex{Pattern: "."}} {
		require.ErrorIs(t, r.Append(ctx, id, comment{ID: "x"}), patterns.ErrInvalid, "parent id %v", id)
		_, _, err := r.Get(ctx, id)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		_, err = r.Count(ctx, id)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorIs(t, r.Remove(ctx, id, "keep"), patterns.ErrInvalid)
		require.ErrorIs(t, r.Remove(ctx, 1, id), patterns.ErrInvalid, "item id %v", id)
		require.ErrorIs(t, r.Delete(ctx, id), patterns.ErrInvalid)
		for _, err := range r.Items(ctx, id) {
			require.ErrorIs(t, err, patterns.ErrInvalid)
		}
	}
	require.ErrorIs(t, r.Append(ctx, 1, comment{ID: "a"}, comment{ID: ""}), patterns.ErrInvalid, "an item without id")
	require.ErrorIs(t, r.Append(ctx, 1, comment{ID: "a"}, comment{ID: "a"}), patterns.ErrInvalid, "one id twice")

	huge := comment{ID: "huge", Text: strings.Repeat("x", patterns.MaxDocumentSize)}
	err := r.Append(ctx, 1, comment{ID: "small"}, huge)
	require.ErrorIs(t, err, patterns.ErrTooLarge)
	require.ErrorContains(t, err, "item 1 (_id \"huge\")")

	_, items, err := r.Get(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"keep"}, idsOf(items), "nothing was written")
}

func TestNotFound(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, _ := newRepo(t, small(), p)
		err := r.Append(ctx, 404, comment{ID: "a"})
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.EqualError(t, err, "outlier: Append: parent 404: no such parent: not found")
		_, _, err = r.Get(ctx, "missing")
		require.EqualError(t, err, `outlier: Get: parent "missing": no such parent: not found`)
		_, _, err = r.Get(ctx, 404)
		require.ErrorIs(t, err, patterns.ErrNotFound)
		_, err = r.Count(ctx, 404)
		require.ErrorIs(t, err, patterns.ErrNotFound)
		n := 0
		for _, err := range r.Items(ctx, 404) {
			require.ErrorIs(t, err, patterns.ErrNotFound)
			n++
		}
		require.Equal(t, 1, n)
		require.ErrorIs(t, r.Delete(ctx, 404), patterns.ErrNotFound)
		if !p.pullByCondition || mongotest.Server().Has(patterns.FeaturePullConditions) {
			require.ErrorIs(t, r.Remove(ctx, 404, "a"), patterns.ErrNotFound)
		}
	})
}

func TestIndexRequired(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		for id := 1; id <= 2; id++ {
			_, err = r.Insert(ctx, post{ID: id})
			require.NoError(t, err)
		}
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 3)...), "the parent needs no index")
		err = r.Append(ctx, 1, comment{ID: "c03"})
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorContains(t, err, "lacks the unique index")
		parent, docs := stored(t, r, 1)
		require.False(t, parent.Lookup("has_extra").Boolean(), "refused before the flag is set")
		require.Empty(t, docs)

		// Items that would fill the parent and overflow: refused before
		// any is written, as ErrInvalid promises.
		require.NoError(t, r.Append(ctx, 2, comment{ID: "c00"}))
		err = r.Append(ctx, 2, comments("c", 1, 5)...)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		parent, _ = stored(t, r, 2)
		require.Equal(t, []string{"c00"}, embedded(t, parent), "nothing was written")

		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		counter := mongotest.NewCounter(t, db)
		cmds := counter.Count(func() { require.NoError(t, r.Append(ctx, 1, comment{ID: "c03"})) })
		require.Contains(t, cmds, "listIndexes")
		cmds = counter.Count(func() { require.NoError(t, r.Append(ctx, 1, comment{ID: "c04"})) })
		require.NotContains(t, cmds, "listIndexes", "checked once")
		require.NoError(t, r.Append(ctx, 2, comments("c", 1, 5)...))
		_, items, err := r.Get(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, idsOf(comments("c", 0, 5)), idsOf(items))
	})
}

// TestNullArray: a parent whose array field is null (a nil slice stored
// without omitempty) or absent reads as empty and takes items: Append
// gives it an array first.
func TestNullArray(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, db := newRepo(t, small(), p)
		_, err := db.Collection("posts").InsertMany(ctx, []any{
			bson.D{{Key: "_id", Value: 1}, {Key: "comments", Value: nil}},
			bson.D{{Key: "_id", Value: 2}},
		})
		require.NoError(t, err)
		for id := 1; id <= 2; id++ {
			_, items, err := r.Get(ctx, id)
			require.NoError(t, err)
			require.Empty(t, items)
			require.NoError(t, r.Append(ctx, id, comments("c", 0, 2)...))
			require.NoError(t, r.Append(ctx, id, comments("c", 2, 5)...))
			_, items, err = r.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, idsOf(comments("c", 0, 5)), idsOf(items))
		}

		// Insert stores a nil slice as an empty array.
		type withComments struct {
			ID       int       `bson:"_id"`
			Comments []comment `bson:"comments"`
		}
		r2, err := New[withComments, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r2, p)
		_, err = r2.Insert(ctx, withComments{ID: 3})
		require.NoError(t, err)
		parent, _ := stored(t, r, 3)
		require.Equal(t, bson.TypeArray, parent.Lookup("comments").Type)
	})
}

// TestFlagBeforeOverflow: an Append that failed after setting the flag
// and before writing the overflow leaves the flag true with no overflow;
// readers see the embedded items, and the next Append fills the document
// the tail hint announced.
func TestFlagBeforeOverflow(t *testing.T) {
	ctx := context.Background()
	r, db := newPost(t, small(), PlanFor(mongotest.Portable()))
	require.NoError(t, r.Append(ctx, 1, comments("c", 0, 3)...))
	_, err := r.parents.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, r.closeUpdate(0))
	require.NoError(t, err)

	counter := mongotest.NewCounter(t, db)
	var items []comment
	cmds := counter.Count(func() { _, items, err = r.Get(ctx, 1) })
	require.NoError(t, err)
	require.Equal(t, []string{"find", "find"}, cmds)
	require.Equal(t, []string{"c00", "c01", "c02"}, idsOf(items))
	n, err := r.Count(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	require.NoError(t, r.Append(ctx, 1, comment{ID: "c03"}))
	_, docs := stored(t, r, 1)
	require.Len(t, docs, 1)
	require.Equal(t, int64(0), docs[0].Seq)
	require.Equal(t, []string{"c03"}, idsOf(docs[0].Items))
}

func TestInsert(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	type withComments struct {
		ID       any       `bson:"_id,omitempty"`
		Title    string    `bson:"title"`
		Comments []comment `bson:"comments,omitempty"`
		HasExtra *bool     `bson:"has_extra,omitempty"`
		Tail     *int      `bson:"extra_tail,omitempty"`
	}
	r, err := New[withComments, comment](db, small())
	require.NoError(t, err)

	id, err := r.Insert(ctx, withComments{Title: "generated id"})
	require.NoError(t, err)
	require.IsType(t, bson.ObjectID{}, id)
	raw, err := r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	require.NoError(t, err)
	require.Equal(t, `{"_id": {"$oid":"`+id.(bson.ObjectID).Hex()+`"},"title": "generated id","comments": [],"has_extra": false,"extra_tail": {"$numberLong":"0"}}`, raw.String())

	no := false
	id, err = r.Insert(ctx, withComments{ID: 2, Comments: comments("c", 0, 3), HasExtra: &no})
	require.NoError(t, err)
	require.Equal(t, int32(2), id)
	p, items, err := r.Get(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"c00", "c01", "c02"}, idsOf(items))
	require.Equal(t, idsOf(items), idsOf(p.Comments), "P's own array field holds the embedded items")

	yes, tail := true, 0
	for name, bad := range map[string]withComments{
		"too many items":  {ID: 3, Comments: comments("c", 0, 4)},
		"item without id": {ID: 3, Comments: []comment{{Text: "anonymous"}}},
		"repeated id":     {ID: 3, Comments: []comment{{ID: "a"}, {ID: "a"}}},
		"flag set":        {ID: 3, HasExtra: &yes},
		"tail set":        {ID: 3, Tail: &tail},
		"empty string id": {ID: ""},
		"document id":     {ID: bson.D{{Key: "$gt", Value: 0}}},
		"zero id":         {ID: 0},
	} {
		_, err := r.Insert(ctx, bad)
		require.ErrorIs(t, err, patterns.ErrInvalid, name)
	}
	_, err = r.Insert(ctx, withComments{ID: 3, Title: strings.Repeat("x", patterns.MaxDocumentSize)})
	require.ErrorIs(t, err, patterns.ErrTooLarge)
	n, err := r.parents.CountDocuments(ctx, bson.D{{Key: "_id", Value: 3}})
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")

	_, err = r.Insert(ctx, withComments{ID: 2})
	require.True(t, mongo.IsDuplicateKeyError(err))
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	r, db := newRepo(t, small(), PlanFor(mongotest.Portable()))
	for id := 1; id <= 2; id++ {
		_, err := r.Insert(ctx, post{ID: id})
		require.NoError(t, err)
		require.NoError(t, r.Append(ctx, id, comments("c", 0, 8)...))
	}
	counter := mongotest.NewCounter(t, db)
	cmds := counter.Count(func() { require.NoError(t, r.Delete(ctx, 1)) })
	require.Equal(t, []string{"delete", "delete"}, cmds)
	_, _, err := r.Get(ctx, 1)
	require.ErrorIs(t, err, patterns.ErrNotFound)
	n, err := r.overflow.CountDocuments(ctx, bson.D{{Key: fParent, Value: 1}})
	require.NoError(t, err)
	require.Zero(t, n)
	_, items, err := r.Get(ctx, 2)
	require.NoError(t, err)
	require.Len(t, items, 8, "other parents are untouched")
}
