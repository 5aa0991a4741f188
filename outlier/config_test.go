package outlier

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// offline is a database handle for tests that send nothing.
var offline = func() *mongo.Database {
	c, err := mongo.Connect()
	if err != nil {
		panic(err)
	}
	return c.Database("offline")
}()

func valid() Config {
	return Config{Parents: "posts", Field: "comments", Cap: 50, OverflowCap: 20}
}

func TestNewDefaults(t *testing.T) {
	r, err := New[bson.Raw, bson.Raw](offline, valid())
	require.NoError(t, err)
	require.Equal(t, Config{
		Parents: "posts", Field: "comments", Cap: 50, Overflow: "posts_overflow", OverflowCap: 20,
		FlagField: "has_extra", TailField: "extra_tail", IDField: "_id", BatchSize: 50,
	}, r.Config())

	big := valid()
	big.OverflowCap = 5000
	r, err = New[bson.Raw, bson.Raw](offline, big)
	require.NoError(t, err)
	require.Equal(t, 1, r.Config().BatchSize, "a batch is at least one document")
}

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no parent collection", func(c *Config) { c.Parents = "" }, "config.Parents"},
		{"parent collection with $", func(c *Config) { c.Parents = "a$b" }, "config.Parents"},
		{"system collection", func(c *Config) { c.Parents = "system.users" }, "config.Parents"},
		{"overflow with NUL", func(c *Config) { c.Overflow = "a\x00" }, "config.Overflow"},
		{"overflow is the parent", func(c *Config) { c.Overflow = "posts" }, "also the parent"},
		{"no field", func(c *Config) { c.Field = "" }, "config.Field"},
		{"field is a path", func(c *Config) { c.Field = "a.b" }, "config.Field"},
		{"field is an operator", func(c *Config) { c.Field = "$set" }, "config.Field"},
		{"field is _id", func(c *Config) { c.Field = "_id" }, "parent's id"},
		{"flag is a path", func(c *Config) { c.FlagField = "x.y" }, "config.FlagField"},
		{"flag is the field", func(c *Config) { c.FlagField = "comments" }, "both"},
		{"tail is the flag", func(c *Config) { c.TailField = "has_extra" }, "both"},
		{"item id is an operator", func(c *Config) { c.IDField = "$id" }, "config.IDField"},
		{"cap 0", func(c *Config) { c.Cap = 0 }, "config.Cap"},
		{"cap negative", func(c *Config) { c.Cap = -1 }, "config.Cap"},
		{"overflow cap 0", func(c *Config) { c.OverflowCap = 0 }, "config.OverflowCap"},
		{"overflow cap negative", func(c *Config) { c.OverflowCap = -5 }, "config.OverflowCap"},
		{"negative batch", func(c *Config) { c.BatchSize = -1 }, "config.BatchSize"},
		{"batch past int32", func(c *Config) { c.BatchSize = math.MaxInt32 + 1 }, "config.BatchSize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.edit(&cfg)
			_, err := New[bson.Raw, bson.Raw](offline, cfg)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "outlier: New: config"), err.Error())
		})
	}
	_, err := New[bson.Raw, bson.Raw](nil, valid())
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.EqualError(t, err, "outlier: New: nil database: invalid")
	_, err = New[bson.Raw, string](offline, valid())
	require.ErrorIs(t, err, patterns.ErrInvalid, "an item must encode as a document")
}

// FuzzConfigNames: New accepts exactly the names the shared validator
// accepts, distinct from each other and from _id, and never panics.
func FuzzConfigNames(f *testing.F) {
	for _, s := range []string{"comments", "a.b", "$x", "", "_id", "has_extra", "x\x00", "\xff"} {
		f.Add(s, "has_extra", "posts")
	}
	f.Fuzz(func(t *testing.T, field, flag, parent string) {
		cfg := valid()
		cfg.Field, cfg.FlagField, cfg.Parents = field, flag, parent
		r, err := New[bson.Raw, bson.Raw](offline, cfg)
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			return
		}
		c := r.Config()
		for _, name := range []string{c.Field, c.FlagField, c.TailField, c.IDField} {
			require.NoError(t, check.Field(name))
		}
		require.NotEqual(t, c.Field, c.FlagField)
		require.NotEqual(t, c.Field, "_id")
		require.NotContains(t, c.Parents, "$")
		require.False(t, strings.HasPrefix(c.Parents, "system."))
	})
}
