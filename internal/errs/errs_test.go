package errs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestFormat(t *testing.T) {
	const pkg errs.Prefix = "subset"
	err := pkg.Wrap("New", errs.Invalid("nil database"))
	require.EqualError(t, err, "subset: New: nil database: invalid")
	require.ErrorIs(t, err, patterns.ErrInvalid)

	err = pkg.Wrap("Add", errs.TooLarge("item %d is %d bytes", 3, 17<<20))
	require.EqualError(t, err, "subset: Add: item 3 is 17825792 bytes: document too large")
	require.ErrorIs(t, err, patterns.ErrTooLarge)

	require.NoError(t, pkg.Wrap("Get", nil))
	cause := errors.New("connection reset")
	require.ErrorIs(t, pkg.Wrap("Get", cause), cause)
}
