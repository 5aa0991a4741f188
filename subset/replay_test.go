package subset_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

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
	linear.Replay(t, subsetHistories, func(text string) (any, string) {
		m := replayRE.FindStringSubmatch(text)
		require.NotNil(t, m, "not an operation of subsetHistories: %q", text)
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
		return in, m[5]
	}, func(outcome string) any {
		res, sub, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(outcome, "{"), "}"), " ")
		return sout{res: res, subset: sub}
	})
}
