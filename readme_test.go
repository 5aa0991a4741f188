package mongopatterns_test

import (
	"bytes"
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// readmeSection returns the text of the README section under heading
// ("## Quick start"), up to the next section.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(readme), "\n"+heading+"\n")
	require.True(t, found, "README.md has a section %q", heading)
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// codeBlocks returns the fenced blocks of a language in a Markdown text.
func codeBlocks(text, lang string) []string {
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestReadmeQuickStartRuns compiles the README's quick start as written,
// a whole program, and runs it twice against the test server: each run
// prints the output the README shows. The only change made to it is the
// database's name, a fresh one per run of the test.
func TestReadmeQuickStartRuns(t *testing.T) {
	section := readmeSection(t, "## Quick start")
	programs := codeBlocks(section, "go")
	require.Len(t, programs, 1, "the quick start holds one Go program")
	outputs := codeBlocks(section, "text")
	require.Len(t, outputs, 1, "the quick start shows what the program prints")
	program := programs[0]

	f, err := parser.ParseFile(token.NewFileSet(), "main.go", program, parser.ImportsOnly)
	require.NoError(t, err, "the quick start is a Go file")
	require.Equal(t, "main", f.Name.Name, "the quick start is a whole program")
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		require.NotContains(t, path, "/internal", "the quick start imports only what a user can import")
	}

	db := mongotest.DB(t)
	const dbLiteral = `client.Database("shop")`
	require.Equal(t, 1, strings.Count(program, dbLiteral))
	program = strings.Replace(program, dbLiteral, "client.Database("+strconv.Quote(db.Name())+")", 1)

	// The program is compiled as a package of this module, at a path that
	// exists only in an overlay, so that the source tree is not written.
	root, err := os.Getwd()
	require.NoError(t, err)
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(src, []byte(program), 0o600))
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "readme_quickstart", "main.go"): src}})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, overlay, 0o600))
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	bin := filepath.Join(dir, "quickstart")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-overlay", overlayFile, "-o", bin, "./readme_quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "the quick start compiles: %s", out)

	for run := 1; run <= 2; run++ {
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), "MONGODB_URI="+mongotest.URI())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "run %d: %s", run, stderr.String())
		require.Equal(t, outputs[0], stdout.String(), "run %d prints what the README shows", run)
	}
}

// TestReadmeGatesOnTheDoctorBinary: the README's doctor commands run the
// installed binary, whose exit status tells findings (1) from errors (2);
// go run would end with 1 for both.
func TestReadmeGatesOnTheDoctorBinary(t *testing.T) {
	section := readmeSection(t, "## Doctor: find the anti-patterns in a live database")
	blocks := codeBlocks(section, "sh")
	require.NotEmpty(t, blocks)
	require.Contains(t, blocks[0], "go install github.com/mongopatterns/mongopatterns/cmd/mongopatterns@latest\n")
	for _, b := range blocks {
		require.NotContains(t, b, "go run", "a gate runs the binary")
		require.Contains(t, b, "\nmongopatterns doctor ")
	}
}
