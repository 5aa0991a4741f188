package doctor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Check samples every collection of db and reports the schema and index
// anti-patterns it finds (see [Rules]), then checks the query shapes,
// pipelines, shard keys and repository indexes that opts lists.
//
// It only reads. Its commands: hello and buildInfo once per client (see
// [patterns.Capabilities]); one listCollections; per collection one
// $collStats (or count), one listIndexes, one $indexStats (none after the
// server has refused it once) and the sample (see [Options].SampleSize:
// one aggregate or find and its getMores); per query shape one explain
// (and a listIndexes for a collection not checked yet); per shard key see
// [AnalyzeShardKey]; per pipeline see [LintPipeline]; for the repository
// indexes see [CheckIndexes]. Collections are checked one at a time, so
// the check adds at most one operation's load to the server; point it at
// a secondary (readPreference=secondaryPreferred in the URI) to keep it
// off the primary.
//
// A rule the server does not let it evaluate (no $indexStats, an explain
// it refuses) is listed in Report.Skipped with the server's answer, never
// passed silently; a query shape whose plan cannot say whether an index
// serves it is judged from the indexes alone, with an info finding that
// says the plan is unreadable. Invalid options are an error wrapping
// [patterns.ErrInvalid]; a collection named in Options.Collections, or by
// a query shape, shard key or pipeline, that does not exist, one wrapping
// [patterns.ErrNotFound] (before any collection is read); a network or
// context error ends the check and is returned.
func Check(ctx context.Context, db *mongo.Database, opts Options) (Report, error) {
	s, err := opts.validate("Check")
	if err != nil {
		return Report{}, err
	}
	if db == nil {
		return Report{}, fmt.Errorf("doctor: Check: nil database: %w", patterns.ErrInvalid)
	}
	c := newChecker(db, s)
	if err := c.run(ctx); err != nil {
		return Report{}, fmt.Errorf("doctor: Check: %w", err)
	}
	return c.report(), nil
}

// checker holds the state of one check.
type checker struct {
	db  *mongo.Database
	s   settings
	rd  *reader
	rep Report
	now func() time.Time
	// specs caches listIndexes per namespace ("db.coll").
	specs map[string]specsEntry
	// indexStatsRefused is the server's answer to the first $indexStats
	// it refused.
	indexStatsRefused error
}

type specsEntry struct {
	specs  []indexSpec
	exists bool
}

func newChecker(db *mongo.Database, s settings) *checker {
	c := &checker{db: db, s: s, rd: &reader{s: s}, now: time.Now, specs: map[string]specsEntry{}}
	c.rep.Thresholds = s.th
	if db != nil {
		c.rep.Database = db.Name()
	}
	return c
}

// add records a finding of an enabled rule.
func (c *checker) add(f Finding) {
	if c.s.on(f.Rule) {
		c.rep.Findings = append(c.rep.Findings, f)
	}
}

func (c *checker) addAll(fs []Finding) {
	for _, f := range fs {
		c.add(f)
	}
}

// skip records that an enabled rule could not be evaluated.
func (c *checker) skip(rule, coll, reason string) {
	if c.s.on(rule) {
		c.rep.Skipped = append(c.rep.Skipped, Skip{Rule: rule, Collection: coll, Reason: reason})
	}
}

// report returns the sorted report.
func (c *checker) report() Report {
	r := c.rep
	r.Notes = append(r.Notes, c.rd.notes...)
	r.Sort()
	return r
}

// indexes returns the indexes of a collection, from the cache or one
// listIndexes command.
func (c *checker) indexes(ctx context.Context, coll *mongo.Collection) ([]indexSpec, bool, error) {
	ns := coll.Database().Name() + "." + coll.Name()
	if e, ok := c.specs[ns]; ok {
		return e.specs, e.exists, nil
	}
	specs, exists, err := listIndexes(ctx, coll)
	if err != nil {
		return nil, false, fmt.Errorf("listIndexes %s: %w", ns, err)
	}
	c.specs[ns] = specsEntry{specs, exists}
	return specs, exists, nil
}

// indexesOf adapts indexes to the pipeline rules, for collections of the
// checked database.
func (c *checker) indexesOf(ctx context.Context) indexLookup {
	return func(coll string) ([]indexSpec, bool, error) { return c.indexes(ctx, c.db.Collection(coll)) }
}

func (c *checker) run(ctx context.Context) error {
	srv, err := patterns.Capabilities(ctx, c.db.Client())
	if err != nil {
		return err
	}
	c.rep.Server = srv.String()
	names, views, err := listCollections(ctx, c.db)
	if err != nil {
		return fmt.Errorf("listCollections: %w", err)
	}
	if len(names) > c.s.th.Collections {
		c.add(Finding{Rule: RuleTooManyCollections, Severity: Warning,
			Message:  fmt.Sprintf("%d collections in database %s", len(names), c.db.Name()),
			Evidence: Evidence{{"collections", len(names)}, {"threshold", c.s.th.Collections}},
			Remedy:   "merge collections of one shape into one, with a field for what the name held (and an index on it); for data split per device or per day, the bucket pattern (package bucket)"})
	}
	selected := names
	if len(c.s.Collections) > 0 {
		selected = nil
		for _, n := range c.s.Collections {
			if !slices.Contains(names, n) && !slices.Contains(views, n) {
				return fmt.Errorf("collection %q: %w", n, patterns.ErrNotFound)
			}
			if slices.Contains(names, n) {
				selected = appendNew(selected, n)
			}
		}
		views = slices.DeleteFunc(views, func(v string) bool { return !slices.Contains(c.s.Collections, v) })
	}
	// A query shape, shard key or pipeline on a collection that does not
	// exist (a typo) would check nothing and pass a CI gate.
	exists := func(n string) bool { return slices.Contains(names, n) || slices.Contains(views, n) }
	for _, q := range c.s.Queries {
		if !exists(q.Collection) {
			return fmt.Errorf("query %s: collection %q: %w", q, q.Collection, patterns.ErrNotFound)
		}
	}
	for _, k := range c.s.ShardKeys {
		if !exists(k.Collection) {
			return fmt.Errorf("shard key %s: collection %q: %w", k, k.Collection, patterns.ErrNotFound)
		}
	}
	for _, p := range c.s.Pipelines {
		if !exists(p.Collection) {
			return fmt.Errorf("pipeline %s: collection %q: %w", p, p.Collection, patterns.ErrNotFound)
		}
	}
	for _, v := range views {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%s is a view: not sampled (its documents come from a pipeline; check the collections it reads)", v))
	}
	for i, name := range selected {
		if err := c.collection(ctx, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if c.s.Progress != nil {
			c.s.Progress(Progress{Collection: name, Done: i + 1, Total: len(selected)})
		}
	}
	for _, q := range c.s.Queries {
		if err := c.query(ctx, q); err != nil {
			return fmt.Errorf("query %s: %w", q, err)
		}
	}
	for _, k := range c.s.ShardKeys {
		if err := c.shardKey(ctx, k); err != nil {
			return fmt.Errorf("shard key %s: %w", k, err)
		}
	}
	for _, p := range c.s.Pipelines {
		fs, err := lintPipeline(p, c.s, c.indexesOf(ctx))
		if err != nil {
			return fmt.Errorf("pipeline %s: %w", p, err)
		}
		c.addAll(fs)
	}
	if err := c.validatorRules(ctx, selected); err != nil {
		return fmt.Errorf("validators: %w", err)
	}
	if err := c.sharding(ctx, srv); err != nil {
		return err
	}
	return c.missingIndexes(ctx, c.s.Indexes)
}

// listCollections returns the names of the collections (time-series
// included) and of the views of db, sorted, without system collections:
// one listCollections command.
func listCollections(ctx context.Context, db *mongo.Database) (colls, views []string, err error) {
	cur, err := db.ListCollections(ctx, bson.D{})
	if err != nil {
		return nil, nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		var d struct {
			Name string `bson:"name"`
			Type string `bson:"type"`
		}
		if err := cur.Decode(&d); err != nil {
			return nil, nil, err
		}
		switch {
		case strings.HasPrefix(d.Name, "system."):
		case d.Type == "view":
			views = append(views, d.Name)
		default:
			colls = append(colls, d.Name)
		}
	}
	slices.Sort(colls)
	slices.Sort(views)
	return colls, views, cur.Err()
}

// collection checks one collection.
func (c *checker) collection(ctx context.Context, name string) error {
	coll := c.db.Collection(name)
	st, err := readCollStats(ctx, coll)
	if err != nil {
		return fmt.Errorf("collection stats: %w", err)
	}
	specs, _, err := c.indexes(ctx, coll)
	if err != nil {
		return err
	}
	if err := c.unused(ctx, coll, specs); err != nil {
		return err
	}
	p := newProfile(c.s.th)
	sm, err := c.rd.read(ctx, coll, st.count, nil, p.add)
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	th := c.s.th
	c.addAll(arrayFindings(name, p, th))
	c.addAll(bloatedFindings(name, p, th))
	c.addAll(dynamicFindings(name, p, th))
	c.addAll(timeSeriesFindings(name, st.count, p, th))
	c.addAll(tooManyIndexes(name, specs, th))
	c.addAll(redundantIndexes(name, specs))
	c.addAll(multikeyCompound(name, specs, p))
	if p.untracked > 0 {
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf(
			"%s: %d paths or keys past the tracking limits (%d object paths, %d keys per path, %d array paths) were not profiled",
			name, p.untracked, maxLevels, maxKeysPerLevel, maxArrayPaths))
	}
	c.rep.Collections = append(c.rep.Collections, summarize(name, st, len(specs), sm, p))
	return nil
}

// unused runs $indexStats and applies the unused-index rule, unless the
// rule is disabled or the server has refused $indexStats before.
func (c *checker) unused(ctx context.Context, coll *mongo.Collection, specs []indexSpec) error {
	if !c.s.on(RuleUnusedIndex) || c.indexStatsRefused != nil {
		return nil
	}
	uses, err := readIndexStats(ctx, coll)
	if ce, refused := serverAnswer(err); refused {
		c.indexStatsRefused = ce
		c.skip(RuleUnusedIndex, "", fmt.Sprintf("$indexStats failed: %v; index use cannot be measured", ce))
		return nil
	}
	if err != nil {
		return fmt.Errorf("$indexStats: %w", err)
	}
	fs, skips := unusedIndexes(coll.Name(), specs, uses, c.now(), c.s.th.UnusedIndexAge)
	c.addAll(fs)
	for _, s := range skips {
		c.skip(s.Rule, s.Collection, s.Reason)
	}
	return nil
}

// summarize describes a checked collection for the report.
func summarize(name string, st collStats, nindexes int, sm Sample, p *profile) CollectionSummary {
	cs := CollectionSummary{Name: name, Documents: st.count, CountSource: st.source, DataBytes: st.size,
		IndexBytes: st.indexSize, Indexes: nindexes, Sample: sm, Sizes: p.sizes.distribution()}
	for _, path := range longestArrays(p, 8) {
		cs.Arrays = append(cs.Arrays, ArraySummary{Path: path, Lengths: p.arrays[path].lengths.distribution()})
	}
	return cs
}

// longestArrays returns the n array paths with the longest arrays.
func longestArrays(p *profile, n int) []string {
	var paths []string
	for path := range p.arrays {
		paths = append(paths, path)
	}
	slices.SortFunc(paths, func(a, b string) int {
		return cmp.Or(cmp.Compare(p.arrays[b].lengths.max, p.arrays[a].lengths.max), strings.Compare(a, b))
	})
	return paths[:min(n, len(paths))]
}
