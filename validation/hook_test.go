package validation_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// TestEveryOperationReports runs Apply and Check, the operations of a
// validator made with the Hook option (issue 37), on each plan: each
// reports one operation on its collection, with the commands it sent
// under its context (mongotest.Recorder.RequireReports), the plan it
// ran, and its outcome; a server without validators gets ErrUnsupported
// with nothing sent. The validator's methods send nothing and report
// nothing.
func TestEveryOperationReports(t *testing.T) {
	ctx := context.Background()
	type row struct {
		name, row    string
		sendsNothing bool
		call         func() error
		outcome      error
	}
	run := func(t *testing.T, rec *mongotest.Recorder, p validation.Plan, rows []row) {
		plan, features := p.Path()
		for _, row := range rows {
			t.Run(row.name+"/"+row.row, func(t *testing.T) {
				op := rec.RequireReports(t, "validation", row.name, row.sendsNothing, row.call)
				require.Equal(t, plan, op.Plan, "the plan it ran")
				require.Equal(t, features, op.Features)
				require.Equal(t, []string{"users"}, op.Collections)
				require.Equal(t, row.outcome, op.Outcome())
				_, known := op.Documents()
				require.False(t, known, "neither writes documents")
			})
		}
	}
	// ok is the outcome of an operation on plan p that the server can run.
	ok := func(p validation.Plan) error {
		if !p.Validators {
			return patterns.ErrUnsupported
		}
		return nil
	}
	mongotest.RunPlans(t, validation.PlanFor, func(t *testing.T, p validation.Plan) {
		db := mongotest.DB(t)
		docs, _ := invalidUsers()
		_, err := db.Collection("users").InsertMany(ctx, docs)
		require.NoError(t, err)
		rec := mongotest.NewRecorder(t)
		v := users(t, validation.Hook(rec))
		only, err := v.Only("role", "root")
		require.NoError(t, err)
		run(t, rec, p, []row{
			{name: "Check", row: "rejects", sendsNothing: !p.Validators, call: func() error {
				_, err := validation.CheckPlan(ctx, db.Collection("users"), v, p)
				return err
			}, outcome: ok(p)},
			{name: "Check", row: "Only keeps the hook", sendsNothing: !p.Validators, call: func() error {
				_, err := validation.CheckPlan(ctx, db.Collection("users"), only, p)
				return err
			}, outcome: ok(p)},
			{name: "Apply", row: "applied", sendsNothing: !p.Validators, call: func() error {
				return validation.ApplyPlan(ctx, db, "users", v, validation.Moderate, validation.Warn, p)
			}, outcome: ok(p)},
			{name: "Apply", row: "bad level", sendsNothing: true, call: func() error {
				return validation.ApplyPlan(ctx, db, "users", v, "sometimes", "", p)
			}, outcome: patterns.ErrInvalid},
		})
		mongotest.RequireEveryOperation(t, v, nil, "Document", "Only", "Portable", "Schema", "String", "Validate")
	})
	// Apply and Check themselves, which decide the plan from the server.
	t.Run("own plan", func(t *testing.T) {
		db := mongotest.DB(t)
		rec := mongotest.NewRecorder(t)
		v := users(t, validation.Hook(rec))
		p := validation.PlanFor(mongotest.Server())
		run(t, rec, p, []row{
			{name: "Check", row: "Check", sendsNothing: !p.Validators, call: func() error {
				_, err := validation.Check(ctx, db.Collection("users"), v)
				return err
			}, outcome: ok(p)},
			{name: "Apply", row: "Apply", sendsNothing: !p.Validators, call: func() error {
				return validation.Apply(ctx, db, "users", v, "", "")
			}, outcome: ok(p)},
		})
	})
}
