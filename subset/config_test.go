package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

func TestNewValidatesTheConfig(t *testing.T) {
	db := mongotest.Client().Database("subset_config") // nothing is sent
	cases := []struct {
		name   string
		change func(c *subset.Config)
	}{
		{"no parents", func(c *subset.Config) { c.Parents = "" }},
		{"no items", func(c *subset.Config) { c.Items = "" }},
		{"one collection for both", func(c *subset.Config) { c.Items = c.Parents }},
		{"collection with $", func(c *subset.Config) { c.Items = "a$b" }},
		{"system collection", func(c *subset.Config) { c.Parents = "system.views" }},
		{"no field", func(c *subset.Config) { c.Field = "" }},
		{"operator field", func(c *subset.Config) { c.Field = "$top" }},
		{"dotted field", func(c *subset.Config) { c.Field = "cache.top" }},
		{"_id as field", func(c *subset.Config) { c.Field = "_id" }},
		{"revision field is the field", func(c *subset.Config) { c.RevisionField = "top" }},
		{"operator revision field", func(c *subset.Config) { c.RevisionField = "$rev" }},
		{"recomputing field is the field", func(c *subset.Config) { c.PushedField = "top" }},
		{"recomputing field is the revision field", func(c *subset.Config) { c.PushedField = "topRev" }},
		{"_id as recomputing field", func(c *subset.Config) { c.PushedField = "_id" }},
		{"dotted recomputing field", func(c *subset.Config) { c.PushedField = "cache.recomputing" }},
		{"count field is the recomputing field", func(c *subset.Config) { c.CountField = "topPushed" }},
		{"count field is the field", func(c *subset.Config) { c.CountField = "top" }},
		{"count field is the revision field", func(c *subset.Config) { c.CountField = "topRev" }},
		{"_id as count field", func(c *subset.Config) { c.CountField = "_id" }},
		{"dotted count field", func(c *subset.Config) { c.CountField = "stats.n" }},
		{"no parent field", func(c *subset.Config) { c.ParentField = "" }},
		{"_id as parent field", func(c *subset.Config) { c.ParentField = "_id" }},
		{"operator id field", func(c *subset.Config) { c.IDField = "$id" }},
		{"id field is the parent field", func(c *subset.Config) { c.IDField = "parent" }},
		{"no sort field", func(c *subset.Config) { c.SortField = "" }},
		{"bad sort path", func(c *subset.Config) { c.SortField = "a..b" }},
		{"sort on the id", func(c *subset.Config) { c.SortField = "_id" }},
		{"sort inside the parent field", func(c *subset.Config) { c.SortField = "parent.at" }},
		{"cap 0", func(c *subset.Config) { c.Cap = 0 }},
		{"negative cap", func(c *subset.Config) { c.Cap = -3 }},
		{"cap beyond any document", func(c *subset.Config) { c.Cap = 1<<20 + 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(3)
			tc.change(&cfg)
			_, err := subset.New[parent, item](db, cfg)
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
	}
	_, err := subset.New[parent, item](nil, config(3))
	require.EqualError(t, err, "subset: New: nil database: invalid")
	cfg := config(3)
	cfg.Cap = 0
	_, err = subset.New[parent, item](db, cfg)
	require.EqualError(t, err, "subset: New: config.Cap: 0; the subset holds from 1 to 1048576 items: invalid")

	cfg = config(1 << 20)
	cfg.SortField = "meta.at"
	_, err = subset.New[parent, item](db, cfg)
	require.NoError(t, err, "a sort path and the largest cap")
}

func TestDefaults(t *testing.T) {
	require.Equal(t, "_id", subset.DefaultIDField)
	require.Equal(t, "Rev", subset.DefaultRevisionSuffix)
	require.Equal(t, "Pushed", subset.DefaultPushedSuffix)
}

func TestIndexes(t *testing.T) {
	db := mongotest.Client().Database("subset_config")
	r, err := subset.New[parent, item](db, config(3))
	require.NoError(t, err)
	ix := r.Indexes()
	require.Len(t, ix, 1, "_id identifies items: no unique index needed")
	require.Equal(t, "items", ix[0].Collection.Name())
	require.Equal(t, bson.D{{Key: "parent", Value: 1}, {Key: "score", Value: -1}, {Key: "_id", Value: -1}}, ix[0].Model.Keys)

	cfg := config(3)
	cfg.IDField, cfg.Descending = "key", false
	r, err = subset.New[parent, item](db, cfg)
	require.NoError(t, err)
	ix = r.Indexes()
	require.Len(t, ix, 2)
	require.Equal(t, bson.D{{Key: "parent", Value: 1}, {Key: "score", Value: 1}, {Key: "key", Value: 1}}, ix[0].Model.Keys)
	require.Equal(t, bson.D{{Key: "parent", Value: 1}, {Key: "key", Value: 1}}, ix[1].Model.Keys)
	var o options.IndexOptions
	for _, set := range ix[1].Model.Options.List() {
		require.NoError(t, set(&o))
	}
	require.True(t, *o.Unique)
}

// TestQueriesUseTheIndex checks, on a server that explains its plans as
// MongoDB does, that the recomputation's find and a page after a cursor
// read the index in order, without a sort in memory.
func TestQueriesUseTheIndex(t *testing.T) {
	mongotest.RequireExplainPlans(t)
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a")
	require.NoError(t, r.Add(ctx, "a", five...))
	// The filters of the recomputation and of a page after the item
	// {_id: 4, score: 40} (see TestPageFilter).
	for name, filter := range map[string]bson.D{
		"first items": {{Key: "parent", Value: "a"}},
		"after a cursor": {{Key: "parent", Value: "a"}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "score", Value: bson.D{{Key: "$lt", Value: 40}}}},
			bson.D{{Key: "score", Value: 40}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: 4}}}},
		}}},
	} {
		var plan bson.Raw
		err := db.RunCommand(ctx, bson.D{
			{Key: "explain", Value: bson.D{
				{Key: "find", Value: "items"}, {Key: "filter", Value: filter},
				{Key: "sort", Value: bson.D{{Key: "score", Value: -1}, {Key: "_id", Value: -1}}}, {Key: "limit", Value: 3},
			}},
			{Key: "verbosity", Value: "queryPlanner"},
		}).Decode(&plan)
		require.NoError(t, err)
		winning := plan.Lookup("queryPlanner", "winningPlan").String()
		require.Contains(t, winning, `"IXSCAN"`, name)
		require.NotContains(t, winning, `"SORT"`, "%s: %s", name, winning)
	}
}
