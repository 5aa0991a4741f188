package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestOddParentIDsAreRefusedAtTheDoor: every generated value that
// patterns.ValidateID refuses (a zero, NaN, null, a document, MinKey,
// JavaScript...) is refused as a parent id by Get, Page, Append and
// Delete with ErrInvalid, before anything is sent.
func TestOddParentIDsAreRefusedAtTheDoor(t *testing.T) {
	ctx := context.Background()
	r, db := newRepo(t, small(), PlanFor(mongotest.Server()))
	c := mongotest.NewCounter(t, db)
	refused := 0
	for _, v := range bsonkinds.All() {
		if patterns.ValidateID(v.V) == nil {
			continue
		}
		refused++
		_, _, err := r.Get(ctx, v.V)
		require.ErrorIs(t, err, patterns.ErrInvalid, v.Name)
		_, _, err = r.Page(ctx, v.V, Cursor{}, 10)
		require.ErrorIs(t, err, patterns.ErrInvalid, v.Name)
		require.ErrorIs(t, r.Append(ctx, v.V, comment{ID: "c1"}), patterns.ErrInvalid, v.Name)
		require.ErrorIs(t, r.Delete(ctx, v.V), patterns.ErrInvalid, v.Name)
	}
	require.Positive(t, refused)
	require.Empty(t, c.Commands(), "nothing is sent")
}
