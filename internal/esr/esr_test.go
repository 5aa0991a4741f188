package esr_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/esr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestKey(t *testing.T) {
	tests := []struct {
		name   string
		fields []esr.Field
		want   bson.D
	}{
		{
			name:   "reorders range, equality, sort",
			fields: []esr.Field{esr.Range("price"), esr.Equality("category"), esr.Sort("createdAt", -1)},
			want:   bson.D{{Key: "category", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "price", Value: 1}},
		},
		{
			name:   "keeps the given order within a role",
			fields: []esr.Field{esr.Sort("b", 1), esr.Equality("x"), esr.Sort("a", -1), esr.Equality("y")},
			want:   bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 1}, {Key: "b", Value: 1}, {Key: "a", Value: -1}},
		},
		{
			name:   "one array field is fine",
			fields: []esr.Field{esr.Equality("tags").Multikey(), esr.Range("date")},
			want:   bson.D{{Key: "tags", Value: 1}, {Key: "date", Value: 1}},
		},
		{
			name:   "dotted paths",
			fields: []esr.Field{esr.Equality("items.product.id")},
			want:   bson.D{{Key: "items.product.id", Value: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := esr.Key(tc.fields...)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestKeyRejects(t *testing.T) {
	tests := []struct {
		name   string
		fields []esr.Field
	}{
		{"no fields", nil},
		{"two array fields", []esr.Field{esr.Equality("tags").Multikey(), esr.Range("sizes").Multikey()}},
		{"duplicate", []esr.Field{esr.Equality("a"), esr.Range("a")}},
		{"bad direction", []esr.Field{esr.Sort("a", 2)}},
		{"bad role", []esr.Field{{Path: "a", Role: 7, Direction: 1}}},
		{"bad path", []esr.Field{esr.Equality("$a")}},
		{"empty path", []esr.Field{esr.Equality("")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := esr.Key(tc.fields...)
			require.ErrorIs(t, err, patterns.ErrInvalid)
		})
	}
}
