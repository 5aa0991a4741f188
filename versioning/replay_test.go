package versioning_test

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
	if os.Getenv("REPLAY") == "" {
		t.Skip("skipped: set REPLAY to a history's .txt")
	}
	lines, err := linear.ReadText(os.Getenv("REPLAY"))
	require.NoError(t, err)
	var ops []porcupine.Operation
	for _, l := range lines {
		m := replayRE.FindStringSubmatch(l.Text)
		require.NotNil(t, m, "not an operation of versionHistories: %q", l.Text)
		id, _ := strconv.ParseInt(m[2], 10, 32)
		value, _ := strconv.Atoi(m[3])
		o := porcupine.Operation{ClientId: l.Client, Call: l.Call, Return: l.Return, Input: vop{op: m[1], id: int32(id), value: value}}
		if strings.HasPrefix(m[4], "unknown") {
			o.Output, o.Return = linear.Unknown{Err: errors.New(m[4])}, math.MaxInt64
		} else {
			res, found, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(m[4], "{"), "}"), " ")
			out := vout{res: res, found: map[int32]string{}}
			for _, d := range foundRE.FindAllStringSubmatch(found, -1) {
				k, _ := strconv.ParseInt(d[1], 10, 32)
				out.found[int32(k)] = d[2]
			}
			o.Output = out
		}
		ops = append(ops, o)
	}
	linear.Explain(t, versionHistories, ops)
}
