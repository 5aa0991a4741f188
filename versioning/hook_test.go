package versioning_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

var ctx = context.Background()

// hookedUsers sets rec as the hook of the users repository.
func hookedUsers(rec patterns.Hook) func(*versioning.Config) {
	return func(c *versioning.Config) { c.Hook = rec }
}

// TestEveryOperationReports runs every exported method of Repo with a
// hook (issue 37): each reports one operation, with the commands it sent
// under its context (mongotest.Recorder.RequireReports), the plan it
// ran, the documents it wrote, and its outcome.
func TestEveryOperationReports(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		db, coll := usersDB(t)
		seed(t, coll, v3("a", "Ada", "Lovelace", "ada@example.com"), v1("b", "Bob Byte", "bob@example.com"),
			v2("c", "Cy Young", "cy@example.com"), v1("m1", "Mia One", "m1@example.com"), v1("m2", "Max Two", "m2@example.com"))
		rec := mongotest.NewRecorder(t)
		r := newUsers(t, db, p, hookedUsers(rec))
		plan, features := p.Path()
		const read = -1 // a read: no documents reported
		var progress [][2]int
		rows := []struct {
			name, row    string
			sendsNothing bool
			call         func(ctx context.Context) error
			docs         int64 // documents written, or read
			outcome      error
		}{
			{name: "Get", row: "current", call: func(ctx context.Context) error { _, err := r.Get(ctx, "a"); return err }, docs: read},
			{name: "Get", row: "written back", call: func(ctx context.Context) error { _, err := r.Get(ctx, "b"); return err }, docs: 1},
			{name: "Get", row: "missing", call: func(ctx context.Context) error { _, err := r.Get(ctx, "zz"); return err }, outcome: patterns.ErrNotFound},
			{name: "Get", row: "bad id", sendsNothing: true, call: func(ctx context.Context) error { _, err := r.Get(ctx, nil); return err }, outcome: patterns.ErrInvalid},
			{name: "Find", row: "one written back", call: func(ctx context.Context) error {
				for _, err := range r.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: "c"}}}}) {
					if err != nil {
						return err
					}
				}
				return nil
			}, docs: 1},
			{name: "Find", row: "projection", sendsNothing: true, call: func(ctx context.Context) error {
				for _, err := range r.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "email", Value: 1}})) {
					return err
				}
				return nil
			}, outcome: patterns.ErrInvalid},
			{name: "Insert", row: "new", call: func(ctx context.Context) error {
				_, err := r.Insert(ctx, User{ID: "d", First: "Dee", Email: "dee@example.com"})
				return err
			}, docs: 1},
			{name: "Insert", row: "duplicate", call: func(ctx context.Context) error {
				_, err := r.Insert(ctx, User{ID: "d", First: "Dee", Email: "dee@example.com"})
				return err
			}, outcome: errDuplicate},
			{name: "Replace", row: "found", call: func(ctx context.Context) error {
				return r.Replace(ctx, "d", User{ID: "d", First: "Dee", Last: "Dot", Email: "dee@example.com"})
			}, docs: 1},
			{name: "Replace", row: "missing", call: func(ctx context.Context) error {
				return r.Replace(ctx, "zz", User{ID: "zz"})
			}, outcome: patterns.ErrNotFound},
			{name: "Update", row: "found", call: func(ctx context.Context) error { return r.Update(ctx, "a", incVisits) }, docs: 1},
			{name: "Update", row: "missing", call: func(ctx context.Context) error { return r.Update(ctx, "zz", incVisits) }, outcome: patterns.ErrNotFound},
			{name: "Update", row: "not an operator", sendsNothing: true, call: func(ctx context.Context) error {
				return r.Update(ctx, "a", bson.D{{Key: "visits", Value: 1}})
			}, outcome: patterns.ErrInvalid},
			{name: "Delete", row: "found", call: func(ctx context.Context) error { return r.Delete(ctx, "d") }, docs: 1},
			{name: "Delete", row: "missing", call: func(ctx context.Context) error { return r.Delete(ctx, "d") }, outcome: patterns.ErrNotFound},
			{name: "MigrateAll", row: "progress", call: func(ctx context.Context) error {
				_, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 1, Progress: func(done, total int) {
					progress = append(progress, [2]int{done, total})
				}})
				return err
			}, docs: 2},
			{name: "MigrateAll", row: "bad options", sendsNothing: true, call: func(ctx context.Context) error {
				_, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: -1})
				return err
			}, outcome: patterns.ErrInvalid},
			{name: "Stats", row: "all", call: func(ctx context.Context) error { _, err := r.Stats(ctx); return err }, docs: read},
		}
		reported := map[string]bool{}
		for _, row := range rows {
			reported[row.name] = true
			t.Run(row.name+"/"+row.row, func(t *testing.T) {
				op := rec.RequireReports(t, "versioning", row.name, row.sendsNothing, func() error { return row.call(ctx) })
				require.Equal(t, plan, op.Plan, "the plan it ran")
				require.Equal(t, features, op.Features)
				require.Equal(t, []string{"users"}, op.Collections)
				if row.outcome == errDuplicate {
					require.True(t, mongo.IsDuplicateKeyError(op.Err), "%v", op.Err)
					return
				}
				require.Equal(t, row.outcome, op.Outcome())
				if row.outcome != nil {
					return
				}
				n, known := op.Documents()
				if row.docs == read {
					require.False(t, known, "a read reports no documents")
				} else {
					require.True(t, known, "a write reports its documents")
					require.Equal(t, row.docs, n)
				}
			})
		}
		require.Equal(t, [][2]int{{1, 2}, {2, 2}}, progress)
		mongotest.RequireEveryOperation(t, r, reported, "Indexes", "Validator")
	})
}

// errDuplicate marks a row whose error is the server's duplicate key.
var errDuplicate = errors.New("duplicate key")

// TestHookSeesLostWriteBack: between Get's read of an old document and
// its write-back, another writer stamps a new revision (as another
// repository's write does): the write-back's compare-and-set matches
// nothing, Get reads the document again and writes it back. The
// operation reports the lost compare-and-set as it happens.
func TestHookSeesLostWriteBack(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		db, coll := usersDB(t)
		seed(t, coll, v1("b", "Bob Byte", "bob@example.com"))
		other := mongotest.NewClient(t).Database(db.Name())
		fired := false
		mongotest.OnCommand(t, db, "update", func(context.Context) {
			if !fired {
				fired = true
				// Not the operation's context: the other writer's command
				// is not the operation's.
				_, err := other.Collection("users").UpdateByID(context.Background(), "b", bson.D{{Key: "$set", Value: bson.D{{Key: "_rev", Value: bson.NewObjectID()}}}})
				assert.NoError(t, err)
			}
		})
		rec := mongotest.NewRecorder(t)
		r := newUsers(t, db, p, hookedUsers(rec))
		op := rec.RequireReports(t, "versioning", "Get", false, func() error {
			_, err := r.Get(ctx, "b")
			return err
		})
		require.True(t, fired)
		require.NoError(t, op.Err)
		require.Equal(t, 1, op.Conflicts())
		require.Equal(t, []patterns.Event{{Kind: patterns.EventConflict}}, rec.Events(op))
		n, _ := op.Documents()
		require.EqualValues(t, 1, n, "written back once")
	})
}

// TestHookSeesRetries: Insert's write fails with FerretDB 2.x's transient
// deadlock (forged by faults.NewTransient) and is sent again: the
// operation reports the retry, with its error, and counts both sends.
func TestHookSeesRetries(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		db, _ := usersDB(t)
		px := faults.NewTransient(t)
		rec := mongotest.NewRecorder(t)
		r := newUsers(t, px.Client().Database(db.Name()), p, hookedUsers(rec))
		px.Arm(1)
		op := rec.RequireReports(t, "versioning", "Insert", false, func() error {
			_, err := r.Insert(ctx, User{ID: "d", First: "Dee"})
			return err
		})
		px.Arm(0)
		require.NoError(t, op.Err)
		require.Equal(t, 1, op.Retries())
		require.Equal(t, []patterns.EventKind{patterns.EventRetry}, kinds(rec.Events(op)))
		require.True(t, srverr.Transient(rec.Events(op)[0].Err), "the deadlock is the event's error")
	})
}

// kinds returns the kinds of events, in order.
func kinds(events []patterns.Event) []patterns.EventKind {
	out := make([]patterns.EventKind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}
