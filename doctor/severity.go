package doctor

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Severity ranks a [Finding]. Severities are ordered: [Info] < [Warning] <
// [Critical]; the zero value is no severity, below all three, and is never
// the severity of a finding.
type Severity int

// The severities, in increasing order.
const (
	// Info: worth knowing, not a defect by itself (an index that serves
	// only part of a query shape, a late projection).
	Info Severity = iota + 1
	// Warning: a known anti-pattern that costs performance or storage
	// today (an array past 1,000 elements, a redundant index).
	Warning
	// Critical: a defect that breaks, or soon will (an array past 10,000
	// elements, a document close to the 16 MiB limit, a missing unique
	// index).
	Critical
)

// String returns "info", "warning" or "critical", and "none" for the zero
// value.
func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	case 0:
		return "none"
	default:
		return fmt.Sprintf("Severity(%d)", int(s))
	}
}

// ParseSeverity parses "info", "warning" or "critical" (case-insensitive,
// surrounding spaces ignored). Anything else is an error wrapping
// [patterns.ErrInvalid].
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "info":
		return Info, nil
	case "warning":
		return Warning, nil
	case "critical":
		return Critical, nil
	}
	return 0, fmt.Errorf("doctor: ParseSeverity: %q is not info, warning or critical: %w", s, patterns.ErrInvalid)
}

// MarshalJSON writes the severity as its name.
func (s Severity) MarshalJSON() ([]byte, error) {
	if s < Info || s > Critical {
		return nil, fmt.Errorf("doctor: Severity.MarshalJSON: %d: %w", int(s), patterns.ErrInvalid)
	}
	return json.Marshal(s.String())
}

// UnmarshalJSON reads a severity written by MarshalJSON.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return fmt.Errorf("doctor: Severity.UnmarshalJSON: %w: %w", err, patterns.ErrInvalid)
	}
	v, err := ParseSeverity(name)
	if err != nil {
		return err
	}
	*s = v
	return nil
}
