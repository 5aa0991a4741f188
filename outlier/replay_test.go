package outlier

import (
	"errors"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
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
	if os.Getenv("REPLAY") == "" {
		t.Skip("skipped: set REPLAY to a history's .txt")
	}
	lines, err := linear.ReadText(os.Getenv("REPLAY"))
	require.NoError(t, err)
	var ops []porcupine.Operation
	for _, l := range lines {
		m := replayRE.FindStringSubmatch(l.Text)
		require.NotNil(t, m, "not an operation of outlierHistories: %q", l.Text)
		parent, _ := strconv.Atoi(m[2])
		o := porcupine.Operation{ClientId: l.Client, Call: l.Call, Return: l.Return, Input: oop{op: m[1], parent: parent, id: m[3], text: m[4]}}
		if strings.HasPrefix(m[5], "unknown") {
			o.Output, o.Return = linear.Unknown{Err: errors.New(m[5])}, math.MaxInt64
		} else {
			f := strings.SplitN(strings.TrimSuffix(strings.TrimPrefix(m[5], "{"), "}"), " ", 4)
			require.Len(t, f, 4, "an outcome of four fields: %q", m[5])
			o.Output = oout{res: f[0], parent: f[1], overflow: f[2], items: f[3]}
		}
		ops = append(ops, o)
	}
	linear.Explain(t, outlierHistories, ops)
}
