package doctor

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestSeverityOrderParseAndJSON(t *testing.T) {
	require.Less(t, Info, Warning)
	require.Less(t, Warning, Critical)
	for _, tc := range []struct {
		in   string
		want Severity
		ok   bool
	}{
		{"info", Info, true}, {"warning", Warning, true}, {"critical", Critical, true},
		{" Warning ", Warning, true}, {"CRITICAL", Critical, true},
		{"", 0, false}, {"warn", 0, false}, {"none", 0, false}, {"error", 0, false},
	} {
		got, err := ParseSeverity(tc.in)
		if !tc.ok {
			require.True(t, errors.Is(err, patterns.ErrInvalid), "%q: %v", tc.in, err)
			require.ErrorContains(t, err, "doctor: ParseSeverity:")
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		var back Severity
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, got, back)
	}
	require.Equal(t, "none", Severity(0).String())
	_, err := json.Marshal(Severity(0))
	require.Error(t, err, "the zero severity is never a finding's")
	var s Severity
	require.ErrorIs(t, json.Unmarshal([]byte(`"fatal"`), &s), patterns.ErrInvalid)
	require.ErrorIs(t, json.Unmarshal([]byte(`3`), &s), patterns.ErrInvalid)
}

func TestEvidenceJSONKeepsOrder(t *testing.T) {
	ev := Evidence{{"maxLength", 1500}, {"meanLength", 74.5}, {"document", "abc"}, {"anchored", true}}
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	require.Equal(t, `{"maxLength":1500,"meanLength":74.5,"document":"abc","anchored":true}`, string(b))
	var back Evidence
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, Evidence{{"maxLength", int64(1500)}, {"meanLength", 74.5}, {"document", "abc"}, {"anchored", true}}, back)
	require.Equal(t, "maxLength=1500, meanLength=74.5, document=abc, anchored=true", ev.String())
	v, ok := ev.Get("document")
	require.True(t, ok)
	require.Equal(t, "abc", v)
	require.ErrorIs(t, json.Unmarshal([]byte(`[1]`), &back), patterns.ErrInvalid)
}

func TestReportSortIsDeterministic(t *testing.T) {
	r := Report{Findings: []Finding{
		{Rule: RuleRedundantIndex, Severity: Warning, Collection: "b", Index: "x"},
		{Rule: RuleUnboundedArray, Severity: Critical, Collection: "z", Field: "a"},
		{Rule: RuleDynamicFieldNames, Severity: Warning, Collection: "b", Field: "f"},
		{Rule: RuleUnindexedQuery, Severity: Info, Collection: "a"},
		{Rule: RuleRedundantIndex, Severity: Warning, Collection: "a", Index: "y"},
	}}
	r.Sort()
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.Severity.String()+" "+f.Collection+" "+f.Rule)
	}
	require.Equal(t, []string{
		"critical z unbounded-array",
		"warning a redundant-index",
		"warning b dynamic-field-names",
		"warning b redundant-index",
		"info a unindexed-query",
	}, got)
	require.Equal(t, Critical, r.Max())
	require.Len(t, r.AtLeast(Warning), 4)
	require.NotNil(t, r.Skipped, "an empty list, not null, in JSON")
}

func TestThresholdDefaultsAndValidation(t *testing.T) {
	th, err := Thresholds{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultArrayLength, th.ArrayLength)
	require.Equal(t, DefaultArrayLengthCritical, th.ArrayLengthCritical)
	require.Equal(t, int64(DefaultDocumentBytes), th.DocumentBytes)
	require.Equal(t, int64(DefaultDocumentBytesCritical), th.DocumentBytesCritical)
	require.Equal(t, DefaultIndexes, th.Indexes)
	require.Equal(t, DefaultCollections, th.Collections)
	require.Equal(t, DefaultUnusedIndexAge, th.UnusedIndexAge)

	th, err = Thresholds{ArrayLength: 50_000}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 50_000, th.ArrayLengthCritical, "a warning threshold above the default critical one raises it")

	for name, bad := range map[string]Thresholds{
		"negative array":        {ArrayLength: -1},
		"critical under":        {ArrayLength: 10, ArrayLengthCritical: 5},
		"document critical":     {DocumentBytes: 100, DocumentBytesCritical: 10},
		"spread of one":         {DynamicKeySpread: 1},
		"share above one":       {ShardKeyShare: 1.5},
		"negative correlation":  {ShardKeyCorrelation: -0.1},
		"negative indexes":      {Indexes: -3},
		"negative unused age":   {UnusedIndexAge: -1},
		"negative lookup field": {LookupFields: -1},
	} {
		_, err := bad.withDefaults()
		require.ErrorIs(t, err, patterns.ErrInvalid, name)
	}

	for name, o := range map[string]Options{
		"sample size":    {SampleSize: -1},
		"sample too big": {SampleSize: MaxSampleSize + 1},
		"sample bytes":   {SampleBytes: -1},
		"unknown rule":   {Disable: []string{"no-such-rule"}},
		"collection":     {Collections: []string{"a$b"}},
		"query":          {Queries: []Query{{Collection: ""}}},
		"shard key":      {ShardKeys: []ShardKey{{Collection: "c"}}},
		"pipeline":       {Pipelines: []Pipeline{{Collection: "c"}}},
		"thresholds":     {Thresholds: Thresholds{Indexes: -1}},
	} {
		_, err := o.validate("Check")
		require.ErrorIs(t, err, patterns.ErrInvalid, name)
		require.ErrorContains(t, err, "doctor: Check:", name)
	}
	s, err := Options{Disable: []string{RuleUnusedIndex}}.validate("Check")
	require.NoError(t, err)
	require.Equal(t, DefaultSampleSize, s.SampleSize)
	require.Equal(t, int64(DefaultSampleBytes), s.SampleBytes)
	require.False(t, s.on(RuleUnusedIndex))
	require.True(t, s.on(RuleUnboundedArray))
	for _, r := range Rules {
		require.True(t, knownRule(r.ID))
		require.NotEmpty(t, r.About)
		require.NotEmpty(t, r.Reads)
	}
}
