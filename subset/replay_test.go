package subset_test

import (
	"bufio"
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

// replayRE reads a line of a history (linear.Check's text).
var replayRE = regexp.MustCompile(`^\s*(\d+)\s+(\d+) client (\d+)\s+(\w+)\((\w+), (.*), (-?\d+) #\d+ .*-> (.*)$`)

// TestReplayHistory replays a history of TestHistories that a soak kept
// (LINEAR_OUT=<dir> writes seed_<seed>.txt for each violation) against
// the model as it is now: REPLAY=<that .txt> go test -run
// TestReplayHistory -v ./subset. It says whether the model accepts it,
// and which single operations, left out, make it acceptable: where to
// look first. It sends nothing to a server; without REPLAY it skips.
func TestReplayHistory(t *testing.T) {
	if os.Getenv("REPLAY") == "" {
		t.Skip("skipped: set REPLAY to a history's .txt")
	}
	f, err := os.Open(os.Getenv("REPLAY"))
	require.NoError(t, err)
	var ops []porcupine.Operation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := replayRE.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("not a line of a history: %q", sc.Text())
		}
		call, _ := strconv.ParseInt(m[1], 10, 64)
		ret, _ := strconv.ParseInt(m[2], 10, 64)
		cl, _ := strconv.Atoi(m[3])
		id, _ := strconv.ParseInt(m[7], 10, 64)
		in := sop{op: m[4], parent: m[5], id: id}
		for _, e := range strings.Split(strings.TrimSuffix(m[6], ","), ",") {
			p := strings.Split(e, ":")
			if len(p) != 2 {
				continue
			}
			a, _ := strconv.ParseInt(p[0], 10, 64)
			b, _ := strconv.ParseInt(p[1], 10, 64)
			in.items = append(in.items, item{ID: a, Parent: m[5], Score: b})
		}
		var out any
		if strings.HasPrefix(m[8], "unknown") {
			out = linear.Unknown{Err: errors.New(m[8])}
			ret = math.MaxInt64
		} else {
			s := strings.TrimSuffix(strings.TrimPrefix(m[8], "{"), "}")
			res, sub, _ := strings.Cut(s, " ")
			out = sout{res: res, subset: sub}
		}
		ops = append(ops, porcupine.Operation{ClientId: cl, Call: call, Return: ret, Input: in, Output: out})
	}
	t.Logf("%d ops: linearizable %v", len(ops), porcupine.CheckOperations(subsetHistories, ops))
	for i := range ops {
		rest := append(append([]porcupine.Operation{}, ops[:i]...), ops[i+1:]...)
		if porcupine.CheckOperations(subsetHistories, rest) {
			t.Logf("without op %d (%v -> %v): linearizable", i, ops[i].Input, ops[i].Output)
		}
	}
}
