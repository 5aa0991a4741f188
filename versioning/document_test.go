package versioning

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestDocHelpersKeepFieldOrder(t *testing.T) {
	base := func() Doc {
		return Doc{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: 2}, {Key: "c", Value: true}}
	}
	tests := []struct {
		name string
		edit func(d *Doc) bool
		ok   bool
		want Doc
	}{
		{"set existing in place", func(d *Doc) bool { d.Set("b", 3); return true }, true,
			Doc{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: 3}, {Key: "c", Value: true}}},
		{"set new appends", func(d *Doc) bool { d.Set("z", nil); return true }, true,
			Doc{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: 2}, {Key: "c", Value: true}, {Key: "z", Value: nil}}},
		{"delete", func(d *Doc) bool { return d.Delete("a") }, true,
			Doc{{Key: "_id", Value: 1}, {Key: "b", Value: 2}, {Key: "c", Value: true}}},
		{"delete missing", func(d *Doc) bool { return d.Delete("nope") }, false, base()},
		{"rename keeps position", func(d *Doc) bool { return d.Rename("b", "bee") }, true,
			Doc{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "bee", Value: 2}, {Key: "c", Value: true}}},
		{"rename over an earlier field", func(d *Doc) bool { return d.Rename("c", "a") }, true,
			Doc{{Key: "_id", Value: 1}, {Key: "b", Value: 2}, {Key: "a", Value: true}}},
		{"rename over a later field", func(d *Doc) bool { return d.Rename("a", "c") }, true,
			Doc{{Key: "_id", Value: 1}, {Key: "c", Value: "x"}, {Key: "b", Value: 2}}},
		{"rename to itself", func(d *Doc) bool { return d.Rename("a", "a") }, true, base()},
		{"rename missing", func(d *Doc) bool { return d.Rename("nope", "a") }, false, base()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base()
			require.Equal(t, tt.ok, tt.edit(&d))
			require.Equal(t, tt.want, d)
		})
	}

	d := base()
	v, ok := d.Get("b")
	require.True(t, ok)
	require.Equal(t, 2, v)
	v, ok = d.Get("nope")
	require.False(t, ok)
	require.Nil(t, v)

	var empty Doc
	empty.Set("a", 1)
	require.Equal(t, Doc{{Key: "a", Value: 1}}, empty, "the zero Doc works")
	require.Equal(t, bson.D{{Key: "a", Value: 1}}, bson.D(empty))
}
