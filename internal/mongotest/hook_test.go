package mongotest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestRecorderSeesTheCommandsOfAnOperation: the monitor gives a command
// to the operation whose context it was sent with (getMore and
// killCursors included), an operation that counted them all passes
// RequireReports, and one that sent a command with another context, or
// counted one too few, is caught.
func TestRecorderSeesTheCommandsOfAnOperation(t *testing.T) {
	db := mongotest.DB(t)
	coll := db.Collection("c")
	docs := []any{bson.D{{Key: "i", Value: 1}}, bson.D{{Key: "i", Value: 2}}, bson.D{{Key: "i", Value: 3}}}
	_, err := coll.InsertMany(context.Background(), docs)
	require.NoError(t, err)
	rec := mongotest.NewRecorder(t)
	info := patterns.OperationInfo{Package: "test", Name: "Scan", Collections: []string{"c"}}

	// counted right: a find of two batches, then a find left open and closed
	op := rec.RequireReports(t, "test", "Scan", false, func() (err error) {
		ctx, op := patterns.StartOperation(context.Background(), rec, info)
		defer func() { op.End(err) }()
		op.Sent(1)
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
		if err != nil {
			return err
		}
		var all []bson.M
		if err := obs.All(ctx, op, cur, &all); err != nil {
			return err
		}
		require.Len(t, all, 3)
		op.Sent(1)
		cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
		if err != nil {
			return err
		}
		require.True(t, obs.Next(ctx, op, cur))
		return obs.Close(ctx, op, cur)
	})
	require.Equal(t, []string{"find", "getMore", "find", "killCursors"}, rec.Sent(op))

	// a command sent with another context, or not counted, is caught
	for name, call := range map[string]func(ctx context.Context, op *patterns.Operation) error{
		"another context": func(_ context.Context, op *patterns.Operation) error {
			op.Sent(1)
			return coll.FindOne(context.Background(), bson.D{}).Err()
		},
		"not counted": func(ctx context.Context, _ *patterns.Operation) error {
			return coll.FindOne(ctx, bson.D{}).Err()
		},
	} {
		ft := &fakeT{TB: t}
		func() {
			defer func() { recover() }() // FailNow of the fake stops here
			rec.RequireReports(ft, "test", "Scan", false, func() (err error) {
				ctx, op := patterns.StartOperation(context.Background(), rec, info)
				defer func() { op.End(err) }()
				return call(ctx, op)
			})
		}()
		require.True(t, ft.failed, "%s: RequireReports passed", name)
	}
}

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) FailNow()              { f.failed = true; panic("FailNow") }
func (f *fakeT) Helper()               {}

func TestRequireEveryOperation(t *testing.T) {
	ft := &fakeT{TB: t}
	func() {
		defer func() { recover() }()
		mongotest.RequireEveryOperation(ft, &patterns.Server{}, map[string]bool{"Has": true})
	}()
	require.True(t, ft.failed, "a method without a row fails")
	mongotest.RequireEveryOperation(t, &patterns.Server{}, map[string]bool{"Has": true}, "Features", "Require", "String", "WithFCV", "Without")
}
