package versioning

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestNewRejectsBadConfig(t *testing.T) {
	db := mongotest.Client().Database("unused")
	up := func(*Doc) error { return nil }
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no collection", func(c *Config) { c.Collection = "" }, "collection name"},
		{"collection with $", func(c *Config) { c.Collection = "a$b" }, "collection name"},
		{"field with dot", func(c *Config) { c.Field = "a.b" }, "Field"},
		{"field with $", func(c *Config) { c.Field = "$v" }, "Field"},
		{"field is _id", func(c *Config) { c.Field = "_id" }, "document id"},
		{"revision field is _id", func(c *Config) { c.RevisionField = "_id" }, "document id"},
		{"same fields", func(c *Config) { c.RevisionField = DefaultField }, "both"},
		{"current 0", func(c *Config) { c.Current = 0; c.Migrations = nil }, "Current is 0"},
		{"nil Up", func(c *Config) { c.Migrations[1].Up = nil }, "no Up function"},
		{"duplicate", func(c *Config) { c.Migrations = append(c.Migrations, Migration{From: 2, Up: up}) }, "two migrations from version 2"},
		{"hole in the middle", func(c *Config) {
			c.Current = 5
			c.Migrations = append(c.Migrations, Migration{From: 4, Up: up})
		}, "no migration from version 3"},
		{"chain short of current", func(c *Config) { c.Current = 4 }, "no migration from version 3"},
		{"from current", func(c *Config) { c.Migrations = append(c.Migrations, Migration{From: 3, Up: up}) }, "a migration from version 3, but Current is 3"},
		{"from 0", func(c *Config) { c.Migrations = append(c.Migrations, Migration{From: 0, Up: up}) }, "versions start at 1"},
		{"implicit below oldest", func(c *Config) { c.Migrations = c.Migrations[1:] }, "Implicit is version 1"},
		{"implicit above current", func(c *Config) { c.Implicit = 4 }, "Implicit is version 4"},
		{"no migrations, old documents", func(c *Config) { c.Migrations = nil }, "Implicit is version 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := usersConfig()
			tt.edit(&cfg)
			_, err := New[User](db, cfg)
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := New[User](nil, usersConfig())
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

func TestNewAcceptsChainsInAnyOrder(t *testing.T) {
	db := mongotest.Client().Database("unused")
	cfg := usersConfig()
	cfg.Migrations[0], cfg.Migrations[1] = cfg.Migrations[1], cfg.Migrations[0]
	r, err := New[User](db, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, r.oldest)
	require.Equal(t, 1, r.implicit)
	require.Equal(t, DefaultField, r.field)
	require.Equal(t, DefaultRevisionField, r.revField)
	require.True(t, r.writeBack)

	// Dropping support for version 1: documents without the field are
	// declared at version 2.
	cfg = usersConfig()
	cfg.Migrations, cfg.Implicit = cfg.Migrations[1:], 2
	r, err = New[User](db, cfg)
	require.NoError(t, err)
	require.Equal(t, 2, r.oldest)

	// A collection that starts versioned: nothing to migrate.
	r, err = New[User](db, Config{Collection: "users", Current: 1})
	require.NoError(t, err)
	require.Equal(t, 1, r.oldest)
}
