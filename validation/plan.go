package validation

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is how [Check] and [Apply] use a server, decided from its
// features on each call (patterns.Capabilities caches them per client).
type plan struct {
	// Validators: the server enforces a validator set by collMod and
	// evaluates the portable form ([patterns.FeatureValidators]);
	// without it Check and Apply return ErrUnsupported before sending
	// anything.
	Validators bool
	// FullSchema: the server's $jsonSchema has every keyword
	// ([patterns.FeatureJSONSchema]), so the validator is
	// [Validator.Document]; without it, [Validator.Portable].
	FullSchema bool
	// CreateWithValidator: create takes the validator
	// ([patterns.FeatureJSONSchema]); without it (FerretDB 2.x ignores
	// one given at create), Apply creates the collection, then sets the
	// validator with collMod.
	CreateWithValidator bool
}

// planFor returns the plan for srv.
func planFor(srv *patterns.Server) plan {
	full := srv.Has(patterns.FeatureJSONSchema)
	return plan{
		Validators:          full || srv.Has(patterns.FeatureValidators),
		FullSchema:          full,
		CreateWithValidator: full,
	}
}

// Path names the plan for a [patterns.Hook].
func (p plan) Path() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeatureValidators, Relies: p.Validators},
		lazy.Use{Feature: patterns.FeatureJSONSchema, Relies: p.FullSchema},
	)
}

// start starts the operation name of v (Apply or Check) on the
// collection named collection of db (nil: unknown), for the hook of v's
// Hook option, if any.
func start(ctx context.Context, v *Validator, name string, db *mongo.Database, collection string) (context.Context, *patterns.Operation) {
	if v == nil || v.hook == nil {
		return ctx, nil
	}
	info := patterns.OperationInfo{Package: string(pkg), Name: name, Collections: []string{collection}}
	if db != nil {
		info.Database = db.Name()
	}
	return patterns.StartOperation(ctx, v.hook, info)
}
