package bucket

import (
	"context"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is what a store decided about its server on first use; it does not
// change afterwards.
type plan struct {
	srv *patterns.Server
	// clientSummaries: compute summaries in the client from bucket
	// summaries and measurements, because the server lacks the $group
	// accumulators $min and $max (or a test forces it).
	clientSummaries bool
	// maxBatch is the most statements AddMany sends in one command; 0:
	// as many as the driver sends.
	maxBatch int
}

// maxBatchFor returns plan.maxBatch for srv: one upsert per command
// where the server lacks [patterns.FeatureBatchedUpdates]. FerretDB 1.x
// runs the statements of an update command in order whatever "ordered"
// says, stops at the first error and reports it at index 0, so after an
// error nobody can tell which upserts of the command were applied; it also
// holds a database connection per statement until the command ends, and
// stalls beyond about a hundred. One upsert per command keeps every
// outcome known there (its cost is in the server's work, not the round
// trip).
func maxBatchFor(srv *patterns.Server) int {
	if !srv.Has(patterns.FeatureBatchedUpdates) {
		return 1
	}
	return 0
}

// capabilities detects the server and checks the features every
// configuration needs.
func (s *settings) capabilities(ctx context.Context) (*patterns.Server, error) {
	srv, err := patterns.Capabilities(ctx, s.coll.Database().Client())
	if err != nil {
		return nil, err
	}
	if s.ttl > 0 {
		if err := srv.Require(patterns.FeatureTTLIndexes); err != nil {
			return nil, err
		}
	}
	return srv, nil
}
