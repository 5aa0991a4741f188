package validation

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// SampleSize is the most rejected documents [Check] returns.
const SampleSize = 20

// Report is what [Check] measured: how many documents the validator
// would reject, and a sample of them.
type Report struct {
	// Rejected counts the documents the validator rejects.
	Rejected int64
	// Sample holds the first rejected documents by _id, at most
	// [SampleSize].
	Sample []Rejection
}

// Rejection is one rejected document: its _id and its first failing
// field, as [Validator.Validate] finds it. Where the server rejects a
// document that Validate passes (a pattern PCRE and Go's regexp read
// differently), Field is empty and Reason says so.
type Rejection struct {
	ID bson.RawValue
	FieldError
}

// Check measures v on coll before it is enforced: it counts the
// documents v would reject (a count of {$nor: [validator]}) and samples
// the first [SampleSize] of them by _id, each with its first failing
// field, so that a caller knows what setting validationAction to "error"
// would break. It changes nothing.
//
// Cost: two commands (an aggregate counting, a find of the sample; the
// find only when something is rejected), plus two once per client to
// learn the server's features; the server reads
// every document to count. The count and the sample are two reads: a
// writer between them may make the sample hold a document the count did
// not, or miss one it did.
//
// On a server with only [patterns.FeatureValidators] (FerretDB 2.x), v is
// evaluated in its portable form (see [Validator.Portable]), and a v
// without one is refused with [patterns.ErrUnsupported]; on a server
// without validators (FerretDB 1.x), Check returns [patterns.ErrUnsupported]
// naming [patterns.FeatureValidators] before sending anything.
func Check(ctx context.Context, coll *mongo.Collection, v *Validator) (_ Report, err error) {
	if coll == nil {
		return Report{}, pkg.Wrap("Check", errs.Invalid("nil collection"))
	}
	ctx, op := start(ctx, v, "Check", coll.Database(), coll.Name())
	defer op.Finish(&err)
	if err := v.usable(); err != nil {
		return Report{}, pkg.Wrap("Check", err)
	}
	srv, err := patterns.Capabilities(ctx, coll.Database().Client())
	if err != nil {
		return Report{}, pkg.Wrap("Check", fmt.Errorf("detect the server: %w", err))
	}
	return measure(ctx, coll, v, planFor(srv), srv.String())
}

// measure is Check on plan p for the server named server.
func measure(ctx context.Context, coll *mongo.Collection, v *Validator, p plan, server string) (Report, error) {
	op := patterns.OperationFrom(ctx)
	if op != nil { // Path allocates: only for a hook
		op.SetPlan(p.Path())
	}
	filter, err := p.validator(v, server)
	if err != nil {
		return Report{}, pkg.Wrap("Check", err)
	}
	rejects := rejectsFilter(filter)
	op.Sent(1)
	n, err := coll.CountDocuments(ctx, rejects)
	if err != nil {
		return Report{}, pkg.Wrap("Check", fmt.Errorf("count the rejected documents of %s: %w", coll.Name(), srverr.Classify(err)))
	}
	rep := Report{Rejected: n}
	if n == 0 {
		return rep, nil
	}
	op.Sent(1)
	cur, err := coll.Find(ctx, rejects, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(SampleSize))
	if err != nil {
		return rep, pkg.Wrap("Check", fmt.Errorf("sample the rejected documents of %s: %w", coll.Name(), srverr.Classify(err)))
	}
	var docs []bson.Raw
	if err := obs.All(ctx, op, cur, &docs); err != nil {
		return rep, pkg.Wrap("Check", fmt.Errorf("sample the rejected documents of %s: %w", coll.Name(), err))
	}
	for _, d := range docs {
		r := Rejection{ID: d.Lookup("_id")}
		if fe := v.Validate(d); fe != nil {
			r.FieldError = *fe
		} else {
			r.Reason = "rejected by the server, passed by Validate"
		}
		rep.Sample = append(rep.Sample, r)
	}
	return rep, nil
}

// validator returns v as plan p sends it to the server named server, or
// an error wrapping patterns.ErrUnsupported.
func (p plan) validator(v *Validator, server string) (bson.D, error) {
	if !p.Validators {
		return nil, &patterns.UnsupportedError{Feature: patterns.FeatureValidators, Server: server}
	}
	d, err := p.filter(v)
	if err != nil {
		return nil, noPortable(err, server)
	}
	return d, nil
}
