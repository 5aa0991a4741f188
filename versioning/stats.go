package versioning

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Stats is the number of documents at each schema version.
type Stats struct {
	// Versions maps a version to its number of documents. Documents
	// without the version field count at the implicit version.
	Versions map[int]int64
	// Invalid counts documents whose version field does not hold an
	// integer (Get and MigrateAll report them as errors).
	Invalid int64
}

// Stats counts the documents at each version with one aggregate command
// ($group on the version field with $sum, which every server has). It
// reads the whole collection (or the version index), so on a large
// collection it is an administrative call, not one for every request.
// Counts are as of the aggregation; concurrent writes may move documents
// between versions while it runs.
func (r *Repo[T]) Stats(ctx context.Context) (_ Stats, err error) {
	ctx, op := r.start(ctx, "Stats")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return Stats{}, pkg.Wrap("Stats", err)
	}
	s, err := r.stats(ctx)
	if err != nil {
		return Stats{}, pkg.Wrap("Stats", r.ofColl(err))
	}
	return s, nil
}

func (r *Repo[T]) stats(ctx context.Context) (Stats, error) {
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := r.coll.Aggregate(ctx, r.statsPipeline())
	if err != nil {
		return Stats{}, err
	}
	var groups []struct {
		Version bson.RawValue `bson:"_id"`
		N       int64         `bson:"n"`
	}
	if err := obs.All(ctx, op, cur, &groups); err != nil {
		return Stats{}, err
	}
	s := Stats{Versions: map[int]int64{}}
	for _, g := range groups {
		v := r.implicit
		if g.Version.Type != bson.TypeNull {
			if v, err = parseVersion(r.field, g.Version); err != nil {
				s.Invalid += g.N
				continue
			}
		}
		s.Versions[v] += g.N
	}
	return s, nil
}
