package subset_test

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

// replayRE reads an operation as subsetHistories describes it.
var replayRE = regexp.MustCompile(`^(\w+)\((\w+), (.*), (-?\d+) #\d+ .*-> (.*)$`)

// TestReplayHistory replays a history of TestHistories that a soak kept
// (LINEAR_OUT=<dir> writes seed_<seed>.txt for each violation) against
// the model as it is now: REPLAY=<that .txt> go test -run
// TestReplayHistory -v ./subset. It says whether the model accepts it,
// and which single operations, left out, make it acceptable: where to
// look first (linear.Explain). It sends nothing to a server; without
// REPLAY it skips.
func TestReplayHistory(t *testing.T) {
	if os.Getenv("REPLAY") == "" {
		t.Skip("skipped: set REPLAY to a history's .txt")
	}
	lines, err := linear.ReadText(os.Getenv("REPLAY"))
	require.NoError(t, err)
	var ops []porcupine.Operation
	for _, l := range lines {
		m := replayRE.FindStringSubmatch(l.Text)
		require.NotNil(t, m, "not an operation of subsetHistories: %q", l.Text)
		id, _ := strconv.ParseInt(m[4], 10, 64)
		in := sop{op: m[1], parent: m[2], id: id}
		for _, e := range strings.Split(strings.TrimSuffix(m[3], ","), ",") {
			p := strings.Split(e, ":")
			if len(p) != 2 {
				continue
			}
			a, _ := strconv.ParseInt(p[0], 10, 64)
			b, _ := strconv.ParseInt(p[1], 10, 64)
			in.items = append(in.items, item{ID: a, Parent: m[2], Score: b})
		}
		o := porcupine.Operation{ClientId: l.Client, Call: l.Call, Return: l.Return, Input: in}
		if strings.HasPrefix(m[5], "unknown") {
			o.Output, o.Return = linear.Unknown{Err: errors.New(m[5])}, math.MaxInt64
		} else {
			res, sub, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(m[5], "{"), "}"), " ")
			o.Output = sout{res: res, subset: sub}
		}
		ops = append(ops, o)
	}
	linear.Explain(t, subsetHistories, ops)
}
