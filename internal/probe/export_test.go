package probe

// RefusedFinding is the finding of a probe whose request failed with err, for
// the tests: its measurement and evidence.
func RefusedFinding(what string, err error) (Measured, string) {
	f := refused(what, err)
	return f.measured, f.evidence
}
