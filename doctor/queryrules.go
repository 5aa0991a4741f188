package doctor

import (
	"context"
	"fmt"
	"strings"
)

// query checks one query shape: its case-insensitive regular expressions,
// the indexes of its collection, and what the server's explain says.
//
// A case-insensitive $regex gives no index bounds: an ordinary index on
// its field is scanned key by key, and "create index {email: 1}" would
// not make the query fast. So the index analysis leaves such a field out
// (unless the shape sorts on it), and the case-insensitive-regex finding
// gives the one remedy for it; a shape that filters only with such
// regexes has no unindexed-query finding.
func (c *checker) query(ctx context.Context, q Query) error {
	full, err := shapeOf(q.Filter, q.Sort)
	if err != nil {
		return err
	}
	for _, re := range full.regexI {
		c.add(Finding{Rule: RuleCaseInsensitiveRegex, Severity: Warning, Collection: q.Collection, Field: re.Path, Query: q.String(),
			Message:  regexMessage(re),
			Evidence: Evidence{{"pattern", re.Pattern}, {"anchored", strings.HasPrefix(re.Pattern, "^")}},
			Remedy:   regexRemedy})
	}
	sh := full.withoutRegexI()
	fields := sh.fields()
	if len(fields) == 0 && len(full.regexI) > 0 {
		return nil
	}
	if len(fields) == 0 {
		reason := fmt.Sprintf("query %s has no filter or sort field an index can serve: it reads the whole collection by design", q)
		if len(sh.opaque) > 0 {
			reason = fmt.Sprintf("query %s filters only with %s, which this analysis does not look into", q, strings.Join(sh.opaque, ", "))
		}
		c.skip(RuleUnindexedQuery, q.Collection, reason)
		return nil
	}
	coll := c.db.Collection(q.Collection)
	specs, exists, err := c.indexes(ctx, coll)
	if err != nil {
		return err
	}
	if !exists {
		c.skip(RuleUnindexedQuery, q.Collection, fmt.Sprintf("query %s: the collection does not exist", q))
		return nil
	}
	best, bestFit, why := -1, fitNone, ""
	for i, ix := range specs {
		if f, w := assess(sh, ix); best < 0 || f > bestFit {
			best, bestFit, why = i, f, w
		}
	}

	var plan *planReading // nil: no explain
	if c.s.on(RuleUnindexedQuery) {
		reply, err := explainFind(ctx, c.db, q)
		if ce, refused := serverAnswer(err); refused {
			c.skip(RuleUnindexedQuery, q.Collection, fmt.Sprintf("query %s: explain failed: %v; whether it scans the collection is not known", q, ce))
		} else if err != nil {
			return fmt.Errorf("explain: %w", err)
		} else {
			r := readPlan(reply)
			plan = &r
		}
	}
	c.addAll(queryFindings(q, sh, specs, best, bestFit, why, plan))
	return nil
}

func regexMessage(re regexUse) string {
	return fmt.Sprintf("case-insensitive $regex /%s/i on %s: an index, if any, is scanned key by key", re.Pattern, re.Path)
}

const regexRemedy = "match by equality on an index with a case-insensitive collation (strength 2), or store a lower-cased copy of the field and index that"

// queryFindings turns the best index fit and the plan read (nil: no
// explain) into findings. A plan that scans the collection makes an
// unindexed-query warning whatever the indexes; otherwise the fit decides:
// full, nothing; out of ESR order, esr-order; partial, an unindexed-query
// of severity info; none, an unindexed-query warning. A plan that cannot
// say whether an index serves the query (see [readPlan]) claims nothing:
// the fit alone decides, and a full fit is an unindexed-query of severity
// info that says the plan is unreadable.
func queryFindings(q Query, sh shape, specs []indexSpec, best int, bestFit fit, why string, plan *planReading) []Finding {
	ideal := keyString(sh.esrKey())
	base := Finding{Collection: q.Collection, Field: strings.Join(sh.fields(), ", "), Query: q.String()}
	ev := Evidence{{"esrIndex", ideal}}
	bestName := ""
	if best >= 0 && bestFit > fitNone {
		bestName = specs[best].Name
		base.Index = bestName
		ev = append(ev, Measure{"bestIndex", bestName}, Measure{"bestIndexKey", keyString(specs[best].Key)})
	}
	readable := plan != nil && plan.Readable
	scan := readable && plan.Scan
	switch {
	case readable:
		ev = append(ev, Measure{"plan", plan.Form + ": " + plan.Text}, Measure{"collectionScan", plan.Scan})
	case plan != nil:
		ev = append(ev, Measure{"plan", "unreadable: " + plan.Text})
	}
	if len(sh.opaque) > 0 {
		ev = append(ev, Measure{"notAnalysed", strings.Join(sh.opaque, ", ")})
	}
	create := fmt.Sprintf("create index %s (Equality, Sort, Range order; patterns.ESRKey builds such keys)", ideal)
	var out []Finding
	f := base
	f.Evidence = ev
	switch {
	case bestFit == fitOrder:
		f.Rule, f.Severity = RuleESROrder, Warning
		f.Message = fmt.Sprintf("index %s %s", bestName, why)
		f.Remedy = fmt.Sprintf("replace index %s with %s", bestName, ideal)
		out = append(out, f)
	case bestFit == fitFull && scan:
		f.Rule, f.Severity = RuleUnindexedQuery, Warning
		f.Message = fmt.Sprintf("index %s serves the shape, but the server's plan scans the collection", bestName)
		f.Remedy = "read the server's explain: a hint, a collation or value types that differ from the index's, or a server that uses indexes for fewer operators, make it scan"
		out = append(out, f)
	case bestFit == fitFull && plan != nil && !readable:
		f.Rule, f.Severity = RuleUnindexedQuery, Info
		f.Message = fmt.Sprintf("plan unreadable: index %s serves the shape by its key; the server's plan cannot say whether the server uses it", bestName)
		f.Remedy = "nothing to change in the indexes; to see the plan, run the query's explain on a server whose plan names the index it reads (MongoDB's IXSCAN)"
		out = append(out, f)
	case bestFit == fitPartial:
		f.Rule, f.Severity = RuleUnindexedQuery, Info
		if scan {
			f.Severity = Warning
		}
		f.Message = fmt.Sprintf("no index serves the whole shape; %s %s", bestName, why)
		f.Remedy = create
		out = append(out, f)
	case bestFit == fitNone:
		f.Rule, f.Severity = RuleUnindexedQuery, Warning
		f.Message = "no index serves the shape"
		if scan {
			f.Message += "; the server's plan scans the collection"
		} else if readable && len(plan.Indexes) > 0 {
			f.Message += fmt.Sprintf("; the server's plan reads %s, which this analysis does not use for the shape", strings.Join(plan.Indexes, ", "))
		}
		f.Remedy = create
		out = append(out, f)
	}
	return out
}
