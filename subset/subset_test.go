package subset_test

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// item is the item of most tests: an integer id and a score with many
// ties, so that the tie-break by id is exercised.
type item struct {
	ID     int64  `bson:"_id"`
	Parent string `bson:"parent,omitempty"`
	Score  int64  `bson:"score"`
	Body   string `bson:"body,omitempty"`
}

// parent is the parent of most tests.
type parent struct {
	ID  string `bson:"_id"`
	Top []item `bson:"top,omitempty"`
	Rev int64  `bson:"topRev,omitempty"`
}

// config is the configuration of most tests: the top items by score,
// highest first.
func config(capacity int) subset.Config {
	return subset.Config{
		Parents: "parents", Field: "top",
		Items: "items", ParentField: "parent",
		SortField: "score", Descending: true,
		Cap: capacity,
	}
}

// newRepo builds a repository on plan p and creates its indexes.
func newRepo[P, I any](t testing.TB, db *mongo.Database, cfg subset.Config, p subset.Plan) *subset.Repo[P, I] {
	t.Helper()
	r, err := subset.New[P, I](db, cfg)
	require.NoError(t, err)
	subset.ForcePlan(r, p)
	require.NoError(t, patterns.EnsureIndexes(context.Background(), r.Indexes()...))
	return r
}

// portable is the plan of a server without any optional feature, which
// every server can take.
var portable = subset.PlanFor(mongotest.Portable())

// pushPlan is the plan of MongoDB 8, which pushes into the subset.
var pushPlan = subset.PlanFor(mongotest.Native())

// insertParents stores empty parents with the given ids.
func insertParents(t testing.TB, db *mongo.Database, ids ...string) {
	t.Helper()
	docs := make([]bson.D, len(ids))
	for i, id := range ids {
		docs[i] = bson.D{{Key: "_id", Value: id}}
	}
	_, err := db.Collection("parents").InsertMany(context.Background(), docs)
	require.NoError(t, err)
}

// ranked sorts items by score, highest first, ties by id, highest first:
// the order of config, computed without the server.
func ranked(items []item) []item {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b item) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out
}

// stored returns the parent's items as the repository lists them.
func stored(t testing.TB, r *subset.Repo[parent, item], parentID string) []item {
	t.Helper()
	var out []item
	for it, err := range r.All(context.Background(), parentID) {
		require.NoError(t, err)
		out = append(out, it)
	}
	return out
}

// requireState asserts that the items collection holds exactly want (in
// the configured order) and that the subset is its first capacity items.
func requireState(t testing.TB, r *subset.Repo[parent, item], parentID string, want []item, capacity int) {
	t.Helper()
	want = ranked(want)
	for i := range want {
		want[i].Parent = parentID
	}
	got := stored(t, r, parentID)
	require.Equal(t, want, got, "the items collection, in order")
	p, err := r.Get(context.Background(), parentID)
	require.NoError(t, err)
	top := want[:min(capacity, len(want))]
	require.Len(t, p.Top, len(top))
	if len(top) > 0 {
		require.Equal(t, top, p.Top, "the subset is the first %d items", capacity)
	}
}

func count(t testing.TB, coll *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	n, err := coll.CountDocuments(context.Background(), filter)
	require.NoError(t, err)
	return n
}
