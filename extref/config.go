package extref

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Config declares one extended reference. The copied fields are not listed
// here: they are the fields of the copy type S given to [New].
type Config struct {
	// Source is the collection of the referenced documents (required).
	Source string
	// IDField is the BSON name of the copy's field that holds the source's
	// _id. Zero value: [DefaultIDField].
	IDField string
	// Targets are the places that hold copies (at least one). Two targets
	// of one collection must not overlap (one path inside the other).
	Targets []Target
	// BatchSize is how many target documents Verify and Repair read per
	// round trip, and how many documents the portable array path reads per
	// round trip and rewrites per command (where the server has
	// [patterns.FeatureBatchedUpdates]; one per command elsewhere). At most
	// 2³¹-1. Zero value: [DefaultBatchSize].
	BatchSize int
	// TransactionLimit is the most target documents that [Ref.Update]
	// rewrites inside one transaction (where the server has
	// [patterns.FeatureTransactions]); a source with more stale copies is
	// updated on the non-transactional path instead (see [Ref.Update]).
	// Zero value: [DefaultTransactionLimit].
	TransactionLimit int
	// ReportSample is the most stale copies, and the most orphan copies,
	// that each [Report] of Verify and Repair names (Report.StaleCopies,
	// Report.OrphanCopies): the first ones the scan finds. It bounds the
	// memory those lists take, not the counts, which are exact. Zero
	// value: [DefaultReportSample].
	ReportSample int
	// ShardKey names the fields of the source collection's shard key
	// (paths, as given to shardCollection) when the source is sharded on
	// anything but _id alone, {region: 1, _id: 1} say. [Ref.Update] then
	// reads their values first (one find by _id, on a server without
	// [patterns.FeatureWritesWithoutShardKey]) and puts them by equality
	// in its findAndModify's filter, which MongoDB before 7.1 refuses
	// without them (see "Sharding" in the package documentation). Empty,
	// the default, adds nothing: right for a source that is not sharded or
	// is sharded on _id. _id (or a path inside it) and a field given twice
	// are refused.
	ShardKey []string
	// Hook, when set, observes every operation of the repository (see
	// [patterns.Hook]); nil reports nothing and costs nothing.
	Hook patterns.Hook
}

// The defaults of [Config]'s fields, used where a field is zero.
const (
	DefaultIDField   = "id"
	DefaultBatchSize = 500
	// DefaultTransactionLimit follows the MongoDB manual's guideline for
	// production transactions: modify no more than 1,000 documents in one.
	DefaultTransactionLimit = 1000
	// DefaultReportSample names 20 stale and 20 orphan copies per
	// report: enough to find the documents a few drifts touched, and to
	// see the pattern of many, in a report printed whole.
	DefaultReportSample = 20
)

// normalize fills in the defaults and checks everything that does not
// depend on the copy type; errors wrap [patterns.ErrInvalid].
func (c Config) normalize() (Config, error) {
	if err := check.Collection(c.Source); err != nil {
		return c, fmt.Errorf("config.Source: %w", err)
	}
	if c.IDField == "" {
		c.IDField = DefaultIDField
	}
	if err := check.Field(c.IDField); err != nil {
		return c, fmt.Errorf("config.IDField: %w", err)
	}
	switch {
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	case c.BatchSize < 0 || c.BatchSize > math.MaxInt32:
		return c, errs.Invalid("BatchSize %d is negative or over the server's maximum (2³¹-1)", c.BatchSize)
	}
	switch {
	case c.TransactionLimit == 0:
		c.TransactionLimit = DefaultTransactionLimit
	case c.TransactionLimit < 0:
		return c, errs.Invalid("TransactionLimit %d is negative", c.TransactionLimit)
	}
	switch {
	case c.ReportSample == 0:
		c.ReportSample = DefaultReportSample
	case c.ReportSample < 0:
		return c, errs.Invalid("ReportSample %d is negative", c.ReportSample)
	}
	if err := shard.CheckFields(c.ShardKey); err != nil {
		return c, fmt.Errorf("config.ShardKey: %w", err)
	}
	c.ShardKey = slices.Clone(c.ShardKey)
	if _, err := parseTargets(c.Targets); err != nil {
		return c, err
	}
	return c, nil
}

// parseTargets checks the targets and parses their paths.
func parseTargets(ts []Target) ([]copyPath, error) {
	if len(ts) == 0 {
		return nil, errs.Invalid("no targets")
	}
	paths := make([]copyPath, len(ts))
	for i, t := range ts {
		if err := check.Collection(t.Collection); err != nil {
			return nil, fmt.Errorf("config.Targets[%d]: %w", i, err)
		}
		p, err := parsePath(t.Path)
		if err != nil {
			return nil, fmt.Errorf("config.Targets[%d] (%s): %w", i, t, err)
		}
		for j, o := range ts[:i] {
			if o.Collection == t.Collection && overlaps(paths[j].inDocument(), p.inDocument()) {
				return nil, errs.Invalid("targets %s and %s overlap", o, t)
			}
		}
		paths[i] = p
	}
	return paths, nil
}

// overlaps reports whether one dotted path is the other or inside it.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}
