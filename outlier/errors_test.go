package outlier

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestRefusedAsTooLarge: a push that the server refuses because the
// parent would pass 16 MiB closes the parent, whichever server refused
// it: MongoDB (10334, and 17419 before 4.4) and FerretDB 2.x (285999133,
// from its DocumentDB engine).
func TestRefusedAsTooLarge(t *testing.T) {
	refusal := func(code int) error {
		return fmt.Errorf("push: %w", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: code, Message: "too large"}}})
	}
	for _, code := range []int{10334, 17419, 285999133} {
		out, err := outcomeOf(nil, refusal(code))
		require.NoError(t, err)
		require.Equal(t, refused, out, "code %d", code)
	}
	_, err := outcomeOf(nil, refusal(11000))
	require.Error(t, err)
	out, err := outcomeOf(&mongo.UpdateResult{MatchedCount: 0}, nil)
	require.NoError(t, err)
	require.Equal(t, missed, out)
}
