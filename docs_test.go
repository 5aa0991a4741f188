package mongopatterns_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Promise (issue 35, "Done when"; README "More" and docs/*): every link in
// the README and docs resolves to a file in the repository. Links in
// docs/ are relative to docs/: docs/servers.md:11 links [`devserver`](devserver)
// and docs/doctor.md:5 [`doctor`](doctor), which resolve to docs/devserver
// and docs/doctor (absent; ../devserver and ../doctor were meant).
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range []string{"README.md", "docs/servers.md", "docs/sharding.md", "docs/doctor.md", "CHANGELOG.md", "CONTRIBUTING.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			l := m[1]
			if strings.Contains(l, "://") || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			p, _, _ := strings.Cut(l, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), p)); err != nil {
				t.Errorf("%s: link %s: %v", f, l, err)
			}
		}
	}
}
