package outlier

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/linear"
)

// replayRE reads an operation as outlierHistories describes it:
// op(parent, id:text double=... read=...) -> {res parent overflow items},
// or -> unknown (...).
var replayRE = regexp.MustCompile(`^(\w+)\((\d+), (\w*):(\w*) double=\w+ read=\d+\) -> (.*)$`)

// TestReplayHistory replays a history of TestHistories that a soak kept
// (LINEAR_OUT=<dir> writes seed_<seed>.txt for each violation) against
// the model as it is now: REPLAY=<that .txt> go test -run
// TestReplayHistory -v ./outlier. It says whether the model accepts it,
// and which single operations, left out, make it acceptable
// (linear.Explain). It sends nothing to a server; without REPLAY it
// skips.
func TestReplayHistory(t *testing.T) {
	linear.Replay(t, outlierHistories, func(text string) (any, string) {
		m := replayRE.FindStringSubmatch(text)
		require.NotNil(t, m, "not an operation of outlierHistories: %q", text)
		parent, _ := strconv.Atoi(m[2])
		return oop{op: m[1], parent: parent, id: m[3], text: m[4]}, m[5]
	}, func(outcome string) any {
		f := strings.SplitN(strings.TrimSuffix(strings.TrimPrefix(outcome, "{"), "}"), " ", 4)
		require.Len(t, f, 4, "an outcome of four fields: %q", outcome)
		return oout{res: f[0], parent: f[1], overflow: f[2], items: f[3]}
	})
}
