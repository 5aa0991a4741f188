package doctor

import (
	"fmt"
	"maps"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// outlierShare: when fewer than this share of the arrays at a path are
// over the threshold, the long ones are outliers (package outlier);
// otherwise every document's array grows (package subset).
const outlierShare = 0.1

// arrayFindings applies the unbounded-array rule to every array path of
// the sample.
func arrayFindings(coll string, p *profile, th Thresholds) []Finding {
	var out []Finding
	for _, path := range slices.Sorted(maps.Keys(p.arrays)) {
		a := p.arrays[path]
		if a.over == 0 {
			continue
		}
		sev, limit := Warning, th.ArrayLength
		if a.overCr > 0 {
			sev, limit = Critical, th.ArrayLengthCritical
		}
		share := float64(a.over) / float64(a.lengths.n)
		remedy := "keep the N most relevant elements embedded and the full list in its own collection: the subset pattern (package subset)"
		if share < outlierShare {
			remedy = "only a few documents hold long arrays: keep the array embedded and overflow the rest into extra documents, the outlier pattern (package outlier)"
		}
		out = append(out, Finding{
			Rule: RuleUnboundedArray, Severity: sev, Collection: coll, Field: path,
			Message: fmt.Sprintf("%d of %d arrays at %s are longer than %d elements; the longest has %d",
				a.over, a.lengths.n, path, th.ArrayLength, a.lengths.max),
			Evidence: Evidence{
				{"maxLength", a.lengths.max}, {"meanLength", ratio(a.lengths.sum / float64(a.lengths.n))},
				{"arrays", a.lengths.n}, {"overThreshold", a.over}, {"threshold", limit}, {"document", a.longestID},
			},
			Remedy: remedy,
		})
	}
	return out
}

// bloatedFindings applies the bloated-document rule. The remedy depends
// on the largest top-level field of the largest document.
func bloatedFindings(coll string, p *profile, th Thresholds) []Finding {
	if p.docsOver == 0 {
		return nil
	}
	l := p.largest
	sev, limit := Warning, th.DocumentBytes
	if l.size > th.DocumentBytesCritical {
		sev, limit = Critical, th.DocumentBytesCritical
	}
	var remedy string
	switch l.fieldType {
	case bson.TypeArray:
		remedy = fmt.Sprintf("its largest field, the array %s, should hold only what reads need: the subset pattern (package subset) or, for a few large documents, the outlier pattern (package outlier)", l.field)
	case bson.TypeBinary, bson.TypeString:
		remedy = fmt.Sprintf("store its largest field, %s, in GridFS or an object store and keep a reference", l.field)
	default:
		remedy = fmt.Sprintf("move its largest field, %s, to a collection of its own read only when needed; embed copies of just the fields reads use (extended reference, package extref)", l.field)
	}
	return []Finding{{
		Rule: RuleBloatedDocument, Severity: sev, Collection: coll, Field: l.field,
		Message: fmt.Sprintf("%d of %d sampled documents are larger than %s; the largest is %s, %s of it in %s",
			p.docsOver, p.docs, bytesString(th.DocumentBytes), bytesString(l.size), bytesString(l.fieldBytes), l.field),
		Evidence: Evidence{
			{"maxBytes", l.size}, {"meanBytes", ratio(p.sizes.sum / float64(p.docs))}, {"overThreshold", p.docsOver},
			{"threshold", limit}, {"largestField", l.field}, {"largestFieldBytes", l.fieldBytes}, {"document", l.id},
		},
		Remedy: remedy,
	}}
}

// timeSeriesShare is the share of sampled documents that must hold the
// same top-level date field for the time-series-documents rule.
const timeSeriesShare = 0.9

// timeSeriesFindings applies the time-series-documents rule: a collection
// of at least Thresholds.TimeSeriesDocuments documents (the server's
// count) whose sampled documents average at most
// Thresholds.TimeSeriesDocumentBytes and hold one top-level date field in
// at least 90% of them.
func timeSeriesFindings(coll string, count int64, p *profile, th Thresholds) []Finding {
	if p.docs == 0 || count < th.TimeSeriesDocuments {
		return nil
	}
	mean := p.sizes.sum / float64(p.docs)
	if mean > float64(th.TimeSeriesDocumentBytes) {
		return nil
	}
	field, n := "", 0
	for _, f := range slices.Sorted(maps.Keys(p.dates)) {
		if p.dates[f] > n {
			field, n = f, p.dates[f]
		}
	}
	share := float64(n) / float64(p.docs)
	if share < timeSeriesShare {
		return nil
	}
	return []Finding{{
		Rule: RuleTimeSeriesDocuments, Severity: Info, Collection: coll, Field: field,
		Message: fmt.Sprintf("%d documents of %.0f bytes on average, each stamped by %s: one measurement per document",
			count, mean, field),
		Evidence: Evidence{
			{"documents", count}, {"meanBytes", ratio(mean)}, {"timeField", field}, {"share", ratio(share)},
			{"thresholdDocuments", th.TimeSeriesDocuments}, {"thresholdBytes", th.TimeSeriesDocumentBytes},
		},
		Remedy: "group measurements per series and time window into bucket documents: the bucket pattern (package bucket), or a time-series collection on MongoDB 5.0+",
	}}
}

// bytesString prints a size to three significant digits, in decimal
// units as the thresholds are given: 512 B, 4.1 kB, 3 MB.
func bytesString(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.3g MB", float64(n)/1e6)
	case n >= 1_000:
		return fmt.Sprintf("%.3g kB", float64(n)/1e3)
	default:
		return fmt.Sprintf("%d B", n)
	}
}
