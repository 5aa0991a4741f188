package extref

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/listers"
)

// TestResumeAfter: Watch adds its StartAfter option to the caller's without
// writing into the spare capacity of the caller's slice.
func TestResumeAfter(t *testing.T) {
	mine := options.ChangeStream().SetBatchSize(7)
	backing := []options.Lister[options.ChangeStreamOptions]{mine, mine}
	opts := backing[:1]
	token := bson.Raw(bsonDoc(t, bson.D{{Key: "_data", Value: "1"}}))

	got := resumeAfter(opts, token)
	require.Len(t, got, 2)
	require.Same(t, mine, backing[1], "the spare slot of the caller's array is untouched")
	o, err := listers.Merged(got)
	require.NoError(t, err)
	require.Equal(t, token, o.StartAfter)
	require.EqualValues(t, 7, *o.BatchSize)

	require.Equal(t, opts, resumeAfter(opts, nil), "no token, no option")
}

func bsonDoc(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}
