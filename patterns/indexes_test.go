package patterns_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestESRKey(t *testing.T) {
	tests := []struct {
		name   string
		fields []patterns.KeyField
		want   bson.D
	}{
		{
			name:   "reorders range, equality, sort",
			fields: []patterns.KeyField{patterns.Range("price"), patterns.Equality("category"), patterns.SortOn("createdAt", -1)},
			want:   bson.D{{Key: "category", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "price", Value: 1}},
		},
		{
			name: "keeps the given order within a role",
			fields: []patterns.KeyField{
				patterns.SortOn("b", 1), patterns.Equality("x"), patterns.SortOn("a", -1), patterns.Equality("y"),
			},
			want: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 1}, {Key: "b", Value: 1}, {Key: "a", Value: -1}},
		},
		{
			name:   "one array field is fine",
			fields: []patterns.KeyField{patterns.Equality("tags").Multikey(), patterns.Range("date")},
			want:   bson.D{{Key: "tags", Value: 1}, {Key: "date", Value: 1}},
		},
		{
			name:   "dotted paths",
			fields: []patterns.KeyField{patterns.Equality("items.product.id")},
			want:   bson.D{{Key: "items.product.id", Value: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := patterns.ESRKey(tc.fields...)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestESRKeyRejects(t *testing.T) {
	tests := []struct {
		name   string
		fields []patterns.KeyField
	}{
		{"no fields", nil},
		{"two array fields", []patterns.KeyField{patterns.Equality("tags").Multikey(), patterns.Range("sizes").Multikey()}},
		{"duplicate", []patterns.KeyField{patterns.Equality("a"), patterns.Range("a")}},
		{"bad direction", []patterns.KeyField{patterns.SortOn("a", 2)}},
		{"bad path", []patterns.KeyField{patterns.Equality("$a")}},
		{"empty path", []patterns.KeyField{patterns.Equality("")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := patterns.ESRKey(tc.fields...)
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
	}
}
