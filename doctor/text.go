package doctor

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the report as a plain-text table a person reads in a
// terminal or a CI log: a header, the findings (most severe first), each
// with its evidence and remedy, the rules that could not be evaluated and
// why, the notes, a table of the collections checked, and the shard keys
// measured.
func (r *Report) WriteText(w io.Writer) error {
	tw := &textWriter{w: w}
	tw.printf("mongopatterns doctor")
	if r.Database != "" { // CheckIndexes' reports name no one database
		tw.printf(": database %s", r.Database)
	}
	if r.Server != "" {
		tw.printf(" on %s", r.Server)
	}
	tw.printf("\n")
	counts := map[Severity]int{}
	for _, f := range r.Findings {
		counts[f.Severity]++
	}
	tw.printf("%s: %d critical, %d warning, %d info\n", plural(len(r.Findings), "finding"), counts[Critical], counts[Warning], counts[Info])

	if len(r.Findings) > 0 {
		tw.printf("\n")
		widths := [3]int{len("critical"), 0, 0}
		for _, f := range r.Findings {
			widths[1] = max(widths[1], len(f.Rule))
			widths[2] = max(widths[2], len(f.Collection))
		}
		for i, f := range r.Findings {
			head := fmt.Sprintf("%3d  %-*s  %-*s  %-*s  %s", i+1, widths[0], f.Severity, widths[1], f.Rule, widths[2], f.Collection, f.where())
			tw.printf("%s\n", strings.TrimRight(head, " "))
			tw.printf("     %s\n", f.Message)
			tw.printf("     evidence: %s\n", f.Evidence)
			tw.printf("     remedy:   %s\n", f.Remedy)
		}
	}
	if len(r.Skipped) > 0 {
		tw.printf("\nnot evaluated:\n")
		for _, s := range r.Skipped {
			where := "all collections"
			if s.Collection != "" {
				where = s.Collection
			}
			tw.printf("  %s (%s): %s\n", s.Rule, where, s.Reason)
		}
	}
	if len(r.Notes) > 0 {
		tw.printf("\nnotes:\n")
		for _, n := range r.Notes {
			tw.printf("  %s\n", n)
		}
	}
	if len(r.Collections) > 0 {
		tw.printf("\ncollections:\n")
		rows := [][]string{{"name", "documents", "indexes", "sample", "largest doc", "mean doc", "longest array"}}
		for _, c := range r.Collections {
			longest := "-"
			if len(c.Arrays) > 0 {
				longest = fmt.Sprintf("%s (%d)", c.Arrays[0].Path, c.Arrays[0].Lengths.Max)
			}
			sample := fmt.Sprintf("%d %s", c.Sample.Documents, c.Sample.Method)
			if c.Sample.Truncated {
				sample += " (byte budget)"
			}
			rows = append(rows, []string{c.Name, fmt.Sprint(c.Documents), fmt.Sprint(c.Indexes), sample,
				bytesString(c.Sizes.Max), bytesString(int64(c.Sizes.Mean)), longest})
		}
		tw.table(rows)
	}
	for _, k := range r.ShardKeys {
		if k.Documents == 0 {
			tw.printf("\nshard key %s %s: nothing to measure: %s\n", k.Collection, k.Key, k.Why)
			continue
		}
		tw.printf("\nshard key %s %s: %d distinct values in %d documents (%s sample), most frequent %.1f%%, %s",
			k.Collection, k.Key, k.Distinct, k.Documents, k.Sample, 100*k.TopShare, k.Monotonicity)
		if k.Why != "" {
			tw.printf(" (%s)", k.Why)
		}
		tw.printf("\n")
		for _, q := range k.Queries {
			tw.printf("  %s: %s (%s)\n", q.Query, q.Targeting, q.Why)
		}
	}
	return tw.err
}

// where names the field, index or query a finding is about.
func (f Finding) where() string {
	var parts []string
	if f.Field != "" {
		parts = append(parts, f.Field)
	}
	if f.Index != "" {
		parts = append(parts, "index "+f.Index)
	}
	if f.Query != "" {
		parts = append(parts, "["+f.Query+"]")
	}
	return strings.Join(parts, "  ")
}

// textWriter writes formatted text and keeps the first error.
type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, args...)
	}
}

// table writes rows with columns padded to their widest cell.
func (t *textWriter) table(rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", widths[i], c)
		}
		t.printf("  %s\n", strings.TrimRight(b.String(), " "))
	}
}

// plural writes a count with its noun, in the plural unless the count is
// one: "1 finding", "3 findings". The noun takes an s.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
