package validation

import (
	"context"
	"go.mongodb.org/mongo-driver/v2/bson"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Plan is the plan of Check and Apply, for the tests.
type Plan = plan

// PlanFor is the plan function, for RunPlans.
var PlanFor = planFor

// CheckPlan is Check taking plan p.
func CheckPlan(ctx context.Context, coll *mongo.Collection, v *Validator, p Plan) (_ Report, err error) {
	ctx, op := start(ctx, v, "Check", coll.Database(), coll.Name())
	defer op.Finish(&err)
	return measure(ctx, coll, v, p, "the server")
}

// ApplyPlan is Apply taking plan p.
func ApplyPlan(ctx context.Context, db *mongo.Database, name string, v *Validator, level Level, action Action, p Plan) (err error) {
	ctx, op := start(ctx, v, "Apply", db, name)
	defer op.Finish(&err)
	return apply(ctx, db, name, v, level, action, p, "the server")
}

// The builders, for commands_test.go.
var (
	RejectsFilter  = rejectsFilter
	CollModCommand = collModCommand
	CreateCommand  = plan.createCommand
	SendForm       = plan.validator
)

// ForType is For of the type t, for tests that build struct types.
func ForType(t reflect.Type, opts ...Option) (*Validator, error) { return forType(t, opts) }

// TypeName is the bsonType alias of a BSON type.
func TypeName(t bson.Type) string { return typeNames[t] }
