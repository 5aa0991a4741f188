package versioning_test

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

// replayRE reads a line of a history (linear.Check's text): call, return,
// client, op(id, value) -> {res map[id:content ...]}.
var replayRE = regexp.MustCompile(`^\s*(\d+)\s+(\d+) client (\d+)\s+(\w+)\((\d+), (-?\d+)\) -> (.*)$`)

// foundRE reads one document of an outcome's map: id:content.
var foundRE = regexp.MustCompile(`(\d+):([^ \]]*)`)

// TestReplayHistory replays a history of TestHistories that a soak kept
// (LINEAR_OUT=<dir> writes seed_<seed>.txt for each violation) against
// the model as it is now: REPLAY=<that .txt> go test -run
// TestReplayHistory -v ./versioning. It says whether the model accepts
// it, and which single operations, left out, make it acceptable. It
// sends nothing to a server; without REPLAY it skips.
func TestReplayHistory(t *testing.T) {
	if os.Getenv("REPLAY") == "" {
		t.Skip("skipped: set REPLAY to a history's .txt")
	}
	f, err := os.Open(os.Getenv("REPLAY"))
	require.NoError(t, err)
	defer f.Close()
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
		id, _ := strconv.ParseInt(m[5], 10, 32)
		value, _ := strconv.Atoi(m[6])
		in := vop{op: m[4], id: int32(id), value: value}
		var out any
		if strings.HasPrefix(m[7], "unknown") {
			out = linear.Unknown{Err: errors.New(m[7])}
			ret = math.MaxInt64
		} else {
			s := strings.TrimSuffix(strings.TrimPrefix(m[7], "{"), "}")
			res, found, _ := strings.Cut(s, " ")
			o := vout{res: res, found: map[int32]string{}}
			for _, d := range foundRE.FindAllStringSubmatch(found, -1) {
				k, _ := strconv.ParseInt(d[1], 10, 32)
				o.found[int32(k)] = d[2]
			}
			out = o
		}
		ops = append(ops, porcupine.Operation{ClientId: cl, Call: call, Return: ret, Input: in, Output: out})
	}
	t.Logf("%d ops: linearizable %v", len(ops), porcupine.CheckOperations(versionHistories, ops))
	for i := range ops {
		rest := append(append([]porcupine.Operation{}, ops[:i]...), ops[i+1:]...)
		if porcupine.CheckOperations(versionHistories, rest) {
			t.Logf("without op %d (%v -> %v): linearizable", i, ops[i].Input, ops[i].Output)
		}
	}
}
