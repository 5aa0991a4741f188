package versioning

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// chain is a configuration with versions 1 to 3.
func chain() Config {
	up := func(*Doc) error { return nil }
	return Config{Collection: "users", Current: 3, Migrations: []Migration{{From: 1, Up: up}, {From: 2, Up: up}}}
}

func TestNormalizeRejectsBadConfig(t *testing.T) {
	up := func(*Doc) error { return nil }
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no collection", func(c *Config) { c.Collection = "" }, "collection name is empty: invalid"},
		{"collection with $", func(c *Config) { c.Collection = "a$b" }, `collection name "a$b" contains '$' or a NUL byte: invalid`},
		{"system collection", func(c *Config) { c.Collection = "system.users" }, `collection name "system.users" is in the server's system namespace: invalid`},
		{"field with dot", func(c *Config) { c.VersionField = "a.b" }, `VersionField: field name "a.b" contains '.'`},
		{"field with $", func(c *Config) { c.VersionField = "$v" }, `VersionField: field name "$v" starts with '$'`},
		{"field is _id", func(c *Config) { c.VersionField = "_id" }, `VersionField: "_id" is the document id: invalid`},
		{"revision field is _id", func(c *Config) { c.RevisionField = "_id" }, `RevisionField: "_id" is the document id: invalid`},
		{"same fields", func(c *Config) { c.RevisionField = DefaultVersionField }, `VersionField and RevisionField are both "schemaVersion": invalid`},
		{"current 0", func(c *Config) { c.Current = 0; c.Migrations = nil }, "Current is 0: want a version from 1 to 2147483647: invalid"},
		{"current past int32", func(c *Config) { c.Current = 1 << 31; c.Migrations = nil }, "Current is 2147483648"},
		{"nil Up", func(c *Config) { c.Migrations[1].Up = nil }, "the migration from version 2 has no Up function: invalid"},
		{"duplicate", func(c *Config) { c.Migrations = append(c.Migrations, Migration{From: 2, Up: up}) }, "two migrations from version 2: invalid"},
		{"hole in the middle", func(c *Config) {
			c.Current = 5
			c.Migrations = append(c.Migrations, Migration{From: 4, Up: up})
		}, "no migration from version 3: the chain from 1 to 5 has a gap: invalid"},
		{"chain short of current", func(c *Config) { c.Current = 4 }, "no migration from version 3: the chain from 1 must reach Current 4: invalid"},
		{"from current", func(c *Config) { c.Migrations = append(c.Migrations, Migration{From: 3, Up: up}) }, "a migration from version 3, but Current is 3: invalid"},
		{"from 0", func(c *Config) { c.Migrations = append(c.Migrations, Migration{From: 0, Up: up}) }, "a migration from version 0: versions start at 1: invalid"},
		{"implicit below oldest", func(c *Config) { c.Migrations = c.Migrations[1:] }, `Implicit is version 1: documents without "schemaVersion" must be at a version this code reads, 2 to 3 (set Implicit): invalid`},
		{"implicit above current", func(c *Config) { c.Implicit = 4 }, "Implicit is version 4"},
		{"negative implicit", func(c *Config) { c.Implicit = -1 }, "Implicit is version -1"},
		{"no migrations, old documents", func(c *Config) { c.Migrations = nil }, "Implicit is version 1"},
		{"shard key _id", func(c *Config) { c.ShardKey = []string{"tenant", "_id"} }, `ShardKey: "_id": every filter holds the _id already`},
		{"shard key version", func(c *Config) { c.ShardKey = []string{"schemaVersion"} }, `ShardKey: "schemaVersion": every write changes the version and the revision`},
		{"shard key in the revision", func(c *Config) { c.ShardKey = []string{"_rev.x"} }, `ShardKey: "_rev.x": every write changes`},
		{"shard key twice", func(c *Config) { c.ShardKey = []string{"tenant", "tenant"} }, `ShardKey: "tenant" is given twice`},
		{"shard key path", func(c *Config) { c.ShardKey = []string{"a..b"} }, `ShardKey: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := chain()
			tt.edit(&cfg)
			_, err := cfg.normalize()
			require.ErrorIs(t, err, patterns.ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestNormalizeFillsDefaults(t *testing.T) {
	cfg := chain()
	cfg.Migrations[0], cfg.Migrations[1] = cfg.Migrations[1], cfg.Migrations[0]
	got, err := cfg.normalize()
	require.NoError(t, err)
	require.Equal(t, DefaultVersionField, got.VersionField)
	require.Equal(t, DefaultRevisionField, got.RevisionField)
	require.Equal(t, DefaultImplicit, got.Implicit)
	require.Equal(t, []int{1, 2}, []int{got.Migrations[0].From, got.Migrations[1].From}, "the chain is sorted")
	require.Equal(t, 2, cfg.Migrations[0].From, "the caller's slice is left alone")
	require.Equal(t, 1, got.oldest())

	// Dropping support for version 1: documents without the field are
	// declared at version 2.
	cfg = chain()
	cfg.Migrations, cfg.Implicit = cfg.Migrations[1:], 2
	got, err = cfg.normalize()
	require.NoError(t, err)
	require.Equal(t, 2, got.oldest())

	// A collection that starts versioned: nothing to migrate.
	got, err = Config{Collection: "users", Current: 1}.normalize()
	require.NoError(t, err)
	require.Equal(t, 1, got.oldest())
	require.Equal(t, 1, got.Implicit)
}

func TestNewErrors(t *testing.T) {
	_, err := New[struct{}](nil, chain())
	require.EqualError(t, err, "versioning: New: nil database: invalid")
	require.ErrorIs(t, err, patterns.ErrInvalid)

	db := mongotest.Client().Database("unused")
	cfg := chain()
	cfg.Collection = "system.users"
	_, err = New[struct{}](db, cfg)
	require.EqualError(t, err, `versioning: New: collection name "system.users" is in the server's system namespace: invalid`)

	r, err := New[struct{}](db, chain())
	require.NoError(t, err)
	require.Equal(t, schema{field: "schemaVersion", revField: "_rev", current: 3, implicit: 1, oldest: 1}, r.schema)
	require.True(t, r.writeBack)
	require.Len(t, r.steps, 2)
}

func TestMigrateOptionsNormalize(t *testing.T) {
	got, err := MigrateOptions{}.normalize()
	require.NoError(t, err)
	require.Equal(t, DefaultBatchSize, got.BatchSize)
	got, err = MigrateOptions{BatchSize: 7, MaxFailures: 2}.normalize()
	require.NoError(t, err)
	require.Equal(t, MigrateOptions{BatchSize: 7, MaxFailures: 2}, got)
	for _, o := range []MigrateOptions{{BatchSize: -1}, {BatchSize: 1 << 31}, {MaxFailures: -1}} {
		_, err := o.normalize()
		require.ErrorIs(t, err, patterns.ErrInvalid, "%+v", o)
	}
}

func TestEncodeLimitsTheStampedDocument(t *testing.T) {
	type doc struct {
		ID string `bson:"_id"`
		S  string `bson:"s"`
	}
	r, err := New[doc](mongotest.Client().Database("unused"), chain())
	require.NoError(t, err)
	small, err := r.encode(doc{ID: "a"})
	require.NoError(t, err)
	fits := doc{ID: "a", S: strings.Repeat("x", patterns.MaxDocumentSize-len(small))}
	got, err := r.encode(fits)
	require.NoError(t, err)
	require.Len(t, got, patterns.MaxDocumentSize, "exactly 16 MiB, stamp included, is stored")
	fits.S += "x"
	_, err = r.encode(fits)
	require.ErrorIs(t, err, patterns.ErrTooLarge)
	require.EqualError(t, err, "16777217 bytes, over the 16777216-byte limit: document too large")
}
