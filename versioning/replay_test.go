package versioning_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/linear"
)

// replayRE reads an operation as versionHistories describes it:
// op(id, value) -> {res map[id:content ...]}, or -> unknown (...).
var replayRE = regexp.MustCompile(`^(\w+)\((\d+), (-?\d+)\) -> (.*)$`)

// foundRE reads one document of an outcome's map: id:content.
var foundRE = regexp.MustCompile(`(\d+):([^ \]]*)`)

// TestReplayHistory replays a history of TestHistories that a soak kept
// (LINEAR_OUT=<dir> writes seed_<seed>.txt for each violation) against
// the model as it is now: REPLAY=<that .txt> go test -run
// TestReplayHistory -v ./versioning. It says whether the model accepts
// it, and which single operations, left out, make it acceptable
// (linear.Explain). It sends nothing to a server; without REPLAY it
// skips.
func TestReplayHistory(t *testing.T) {
	linear.Replay(t, versionHistories, func(text string) (any, string) {
		m := replayRE.FindStringSubmatch(text)
		require.NotNil(t, m, "not an operation of versionHistories: %q", text)
		id, _ := strconv.ParseInt(m[2], 10, 32)
		value, _ := strconv.Atoi(m[3])
		return vop{op: m[1], id: int32(id), value: value}, m[4]
	}, func(outcome string) any {
		res, found, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(outcome, "{"), "}"), " ")
		out := vout{res: res, found: map[int32]string{}}
		for _, d := range foundRE.FindAllStringSubmatch(found, -1) {
			k, _ := strconv.ParseInt(d[1], 10, 32)
			out.found[int32(k)] = d[2]
		}
		return out
	})
}
