package doctor

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
)

//go:embed report.html.tmpl
var reportTemplate string

var htmlTemplate = template.Must(template.New("report").Parse(reportTemplate))

// WriteHTML writes the report as one self-contained HTML page (inline CSS,
// SVG and a few lines of JavaScript; no external resources) that a person
// opens in a browser: the findings with their evidence and remedies, a
// filter by severity, and for each collection two charts drawn as inline
// SVG: the distribution of its sampled documents' sizes and the longest
// arrays per field, each against the threshold in Report.Thresholds (its
// zero fields take their defaults).
func (r *Report) WriteHTML(w io.Writer) error {
	th, err := r.Thresholds.withDefaults()
	if err != nil {
		return fmt.Errorf("doctor: WriteHTML: %w", err)
	}
	page := htmlPage{Report: r, Counts: map[string]int{}}
	for _, f := range r.Findings {
		page.Counts[f.Severity.String()]++
	}
	for _, c := range r.Collections {
		page.Charts = append(page.Charts, collectionCharts{
			CollectionSummary: c,
			Sizes:             sizeChart(c, th.DocumentBytes),
			Arrays:            arrayChart(c, th.ArrayLength),
		})
	}
	if err := htmlTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("doctor: WriteHTML: %w", err)
	}
	return nil
}

type htmlPage struct {
	*Report
	Counts map[string]int
	Charts []collectionCharts
}

type collectionCharts struct {
	CollectionSummary
	Sizes, Arrays chart
}

// chart is an SVG chart with its geometry computed here, so that the page
// needs no script to draw it.
type chart struct {
	Kind          string // data-chart attribute: "document-sizes" or "array-lengths"
	Title         string
	Width, Height int
	Bars          []bar
	Marker        *marker // the threshold
	Empty         string  // shown instead of bars when there is nothing to draw
}

type bar struct {
	X, Y, W, H float64
	Over       bool   // past the threshold
	Label      string // under or beside the bar
	LabelX     float64
	LabelY     float64
	Value      string // shown at the bar's end
	ValueX     float64
	ValueY     float64
	Tip        string // tooltip
}

type marker struct {
	X1, Y1, X2, Y2 float64
	Label          string
	LabelX, LabelY float64
	Anchor         string // text-anchor of the label
}

// newMarker is a vertical threshold line at x from top to bottom, its
// label beside it, on the side where it fits.
func newMarker(x, top, bottom float64, label string) *marker {
	m := &marker{X1: x, Y1: top, X2: x, Y2: bottom, Label: label, LabelX: x + 4, LabelY: top + 10, Anchor: "start"}
	if x > chartW-90 {
		m.LabelX, m.Anchor = x-4, "end"
	}
	return m
}

const (
	chartW, chartH = 460, 220
	padL, padT     = 10, 30 // left margin; top margin, under the title
	padB           = 40     // bottom margin, for the axis labels
	maxSlot        = 70     // widest histogram bar slot
	minLabelGap    = 64     // least distance between axis labels
)

// sizeChart is a histogram of document sizes, one bar per power-of-two
// bucket, bars past the threshold in red. Its axis runs from the smaller
// of the smallest size and the threshold to the larger of the largest size
// and the threshold, so that the threshold's line stands where it is on
// the scale: far to the right of a collection of small documents.
func sizeChart(c CollectionSummary, threshold int64) chart {
	ch := chart{Kind: "document-sizes", Title: "document sizes (sampled)", Width: chartW, Height: chartH}
	if len(c.Sizes.Buckets) == 0 {
		ch.Empty = "no documents"
		return ch
	}
	bs := withThreshold(c.Sizes.Buckets, threshold)
	maxCount := 0
	for _, b := range bs {
		maxCount = max(maxCount, b.Count)
	}
	bottom := float64(chartH - padB)
	plotH := bottom - padT - 14
	slot := min(float64(chartW-2*padL)/float64(len(bs)), maxSlot)
	every := int(math.Ceil(minLabelGap / slot)) // label every n-th bucket
	for i, b := range bs {
		h := plotH * float64(b.Count) / float64(maxCount)
		x := padL + float64(i)*slot
		br := bar{
			X: x + 2, Y: bottom - h, W: max(slot-4, 1), H: h, Over: b.Lo > threshold,
			LabelX: x + slot/2, LabelY: bottom + 14, ValueX: x + slot/2, ValueY: bottom - h - 4,
			Tip: fmt.Sprintf("%d documents of %s to %s", b.Count, bytesString(b.Lo), bytesString(b.Hi)),
		}
		if i%every == 0 {
			br.Label = bytesString(b.Lo)
		}
		if b.Count > 0 {
			br.Value = fmt.Sprint(b.Count)
		}
		ch.Bars = append(ch.Bars, br)
		if b.Lo <= threshold && threshold < b.Hi {
			mx := x + slot*float64(threshold-b.Lo)/float64(b.Hi-b.Lo)
			ch.Marker = newMarker(mx, padT, bottom, "limit "+bytesString(threshold))
		}
	}
	return ch
}

// withThreshold extends power-of-two buckets (see [histogram]) with empty
// ones on either side, up to the bucket that holds threshold.
func withThreshold(bs []Bucket, threshold int64) []Bucket {
	first, last := bucketOf(bs[0].Lo), bucketOf(bs[len(bs)-1].Lo)
	t := bucketOf(max(threshold, 0))
	out := make([]Bucket, 0, max(last, t)-min(first, t)+1)
	for k := min(first, t); k < first; k++ {
		lo, hi := bounds(k)
		out = append(out, Bucket{Lo: lo, Hi: hi})
	}
	out = append(out, bs...)
	for k := last + 1; k <= t; k++ {
		lo, hi := bounds(k)
		out = append(out, Bucket{Lo: lo, Hi: hi})
	}
	return out
}

// arrayChart draws the longest array of each array field as a horizontal
// bar on a logarithmic scale, with the threshold marked.
func arrayChart(c CollectionSummary, threshold int) chart {
	ch := chart{Kind: "array-lengths", Title: "longest array per field (log scale)", Width: chartW, Height: chartH}
	if len(c.Arrays) == 0 {
		ch.Empty = "no arrays"
		return ch
	}
	top := math.Log10(float64(max(int64(threshold)*10, c.Arrays[0].Lengths.Max)) + 1)
	labelW, plotW := 150.0, float64(chartW)-150-50
	row := min(float64(chartH-padT-20)/float64(len(c.Arrays)), 30)
	scale := func(v int64) float64 { return plotW * math.Log10(float64(v)+1) / top }
	for i, a := range c.Arrays {
		y := padT + float64(i)*row
		w := scale(a.Lengths.Max)
		ch.Bars = append(ch.Bars, bar{
			X: labelW, Y: y + 2, W: max(w, 1), H: max(row-6, 2), Over: a.Lengths.Max > int64(threshold),
			Label: a.Path, LabelX: labelW - 6, LabelY: y + row/2 + 2,
			Value: fmt.Sprint(a.Lengths.Max), ValueX: labelW + w + 4, ValueY: y + row/2 + 2,
			Tip: fmt.Sprintf("%s: %d arrays, longest %d, mean %.1f", a.Path, a.Lengths.Count, a.Lengths.Max, a.Lengths.Mean),
		})
	}
	ch.Marker = newMarker(labelW+scale(int64(threshold)), padT-6, chartH-10, fmt.Sprintf("limit %d", threshold))
	ch.Marker.LabelY = chartH - 2
	return ch
}
