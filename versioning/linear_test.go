package versioning_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// The operations of the linearizability test.
type opKind int

const (
	opGet      opKind = iota // Get through the repository, which writes back
	opPeek                   // Get through a repository with NoWriteBack
	opInc                    // Update {$inc: {visits: 1}}
	opSetFirst               // Update {$set: {first: <value>}}
	opOldInc                 // Update {$inc: {visits: 1}} by the older release (version 1)
	opRawInc                 // the driver's updateOne {$inc: {visits: 1}, $set: {_rev: <new>}}: a script that sets a new revision
)

func (k opKind) String() string {
	return [...]string{"get", "peek", "inc", "setFirst", "oldInc", "rawInc"}[k]
}

// lin is an operation of the history: on document id, with a value for
// setFirst.
type lin struct {
	id    string
	v2    bool // the document was stored at version 2 (else 1)
	kind  opKind
	first string
}

// outcome is what an operation returned: for a read, the document; for a
// write, whether it landed (applied), did not (refused: ErrConflict, or
// ErrNewerSchema for the older release), or may have (unknown: the
// connection failed).
type outcome struct {
	user    TracedUser
	applied bool
	unknown bool
}

// logical is the model's state of one document: what it is as the
// current shape, apart from the fields no operation changes. A migration
// of what is stored is not a change of it.
type logical struct {
	visits int
	first  string
}

// linUser is a document of the test as Get must return it in state s:
// one that was stored at version 2 when v2, at version 1 otherwise.
func linUser(id string, v2 bool, s logical) TracedUser {
	applied := []string{"1>2", "2>3"}
	if v2 {
		applied = applied[1:]
	}
	return TracedUser{User: User{ID: id, First: s.first, Last: "Lovelace", Email: "ada@example.com", Locale: "en", Visits: s.visits}, Applied: applied}
}

// versioningModel is the sequential specification of a repository's Get
// and Update on one document (the history is partitioned by document):
// Get and the read without write-back return the current value, whatever
// version is stored; an update applies at once, whole, at one point
// between its call and its return, or not at all when it reports so; an
// update whose outcome is unknown may have applied or not. So no update
// is lost, a reader never sees an update applied to an old shape (the
// migration would undo a $set of first made on version 1), and a read
// never returns a value older than one a completed read or update saw.
var versioningModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var ids []string
		for _, op := range history {
			id := op.Input.(lin).id
			if _, ok := by[id]; !ok {
				ids = append(ids, id)
			}
			by[id] = append(by[id], op)
		}
		out := make([][]porcupine.Operation, len(ids))
		for i, id := range ids {
			out[i] = by[id]
		}
		return out
	},
	Init: func() []any { return []any{logical{first: "Ada"}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(logical), input.(lin), output.(outcome)
		next := s
		switch in.kind {
		case opGet, opPeek:
			got, want := out.user, linUser(in.id, in.v2, s)
			if got.ID != want.ID || got.User != want.User || fmt.Sprint(got.Applied) != fmt.Sprint(want.Applied) {
				return nil
			}
			return []any{s}
		case opInc, opOldInc, opRawInc:
			next.visits++
		case opSetFirst:
			next.first = in.first
		}
		switch {
		case out.unknown:
			return []any{s, next}
		case out.applied:
			return []any{next}
		}
		return []any{s}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lin), output.(outcome)
		switch {
		case in.kind == opGet || in.kind == opPeek:
			return fmt.Sprintf("%s(%s) -> visits %d, first %q", in.kind, in.id, out.user.Visits, out.user.First)
		case out.unknown:
			return fmt.Sprintf("%s(%s %s) -> unknown", in.kind, in.id, in.first)
		}
		return fmt.Sprintf("%s(%s %s) -> applied %v", in.kind, in.id, in.first, out.applied)
	},
	DescribeState: func(state any) string {
		s := state.(logical)
		return fmt.Sprintf("visits %d, first %q", s.visits, s.first)
	},
}

// TestGetAndUpdateAreLinearizable records a concurrent history of
// goroutines sharing one repository over documents that start at old
// versions (1 without the version field, 1 with it, 2): Gets that migrate
// and write back, reads without write-back, increments and $sets through
// the current release, increments through the older release still
// running during a rolling deploy (refused once a document is migrated),
// and increments by the driver that set a new revision (code outside the
// package that the write-back protects, as the Repo's godoc says; writes
// that change neither field are its documented exception, not made here).
// It goes in rounds, one document per round, every goroutine on it at
// once, so that the operations meet while the document is old; the
// migration takes a millisecond, so that writers land between a read and
// its write-back. In the second half, each document is stored at the
// start of its round, and two MigrateAll runs race the goroutines for it.
// It checks the history against versioningModel, then the stored
// documents: every one at the current version, each step applied once,
// its value the model's; and the runs' counts: each document written by
// one writer at most, the other counting it skipped.
func TestGetAndUpdateAreLinearizable(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		rounds, workers, perRound := mongotest.Scale(40, 16), 4, 3
		docs := make([]lin, rounds)
		seeds := make([]bson.D, rounds)
		for i := range docs {
			docs[i] = lin{id: fmt.Sprintf("u%02d", i), v2: i%3 == 2}
			seeds[i] = oldV1(docs[i].id, "Ada Lovelace", "ada@example.com", 0)
			switch i % 3 {
			case 1: // version 1, stamped: only the revision tells the older release's writes
				seeds[i] = append(seeds[i], bson.E{Key: "schemaVersion", Value: int32(1)})
			case 2:
				seeds[i] = oldV2(docs[i].id, "Ada Lovelace", "ada@example.com", 0)
			}
		}
		// The first half is stored at the start; each document of the
		// second half at the start of its round, where two MigrateAll runs
		// race the goroutines for it.
		seedRaw(t, db, seeds[:rounds/2]...)
		cfg := func(noWriteBack bool) versioning.Config {
			return versioning.Config{Collection: "users", Current: 3, NoWriteBack: noWriteBack, Migrations: []versioning.Migration{
				{From: 1, Up: traceStep("1>2", renameMail)},
				{From: 2, Up: traceStep("2>3", func(d *versioning.Doc) error { time.Sleep(time.Millisecond); return splitName(d) })},
			}}
		}
		r := newRepo[TracedUser](t, db, p, cfg(false))
		peek := newRepo[TracedUser](t, db, p, cfg(true))
		old := oldRelease(t, db, p)

		var (
			h          linear.History
			mu         sync.Mutex
			unexpected []error
		)
		fail := func(in lin, err error) {
			mu.Lock()
			unexpected = append(unexpected, fmt.Errorf("%s(%s): %w", in.kind, in.id, err))
			mu.Unlock()
		}
		// write is the outcome of an update: applied, refused as the
		// godoc says (refusals are the errors that mean "not applied"),
		// or unknown for an error of the connection.
		write := func(in lin, err error, refusals ...error) outcome {
			switch {
			case err == nil:
				return outcome{applied: true}
			case faults.Broken(err):
				return outcome{unknown: true}
			}
			for _, r := range refusals {
				if errors.Is(err, r) {
					return outcome{}
				}
			}
			fail(in, err)
			return outcome{unknown: true}
		}
		do := func(w int, in lin) {
			h.Do(w, in, func() any {
				switch in.kind {
				case opGet, opPeek:
					repo := r
					if in.kind == opPeek {
						repo = peek
					}
					u, err := repo.Get(ctx, in.id)
					if err != nil {
						fail(in, err)
						return outcome{unknown: true} // no read to check
					}
					return outcome{user: u}
				case opInc:
					return write(in, r.Update(ctx, in.id, incVisits), patterns.ErrConflict)
				case opSetFirst:
					return write(in, r.Update(ctx, in.id, bson.D{{Key: "$set", Value: bson.D{{Key: "first", Value: in.first}}}}), patterns.ErrConflict)
				case opOldInc:
					return write(in, old.Update(ctx, in.id, incVisits), patterns.ErrConflict, versioning.ErrNewerSchema)
				default:
					_, err := db.Collection("users").UpdateOne(ctx, bson.D{{Key: "_id", Value: in.id}},
						bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "_rev", Value: bson.NewObjectID()}}}})
					return write(in, err)
				}
			})
		}

		runs := make([][2]versioning.MigrateResult, rounds)
		rnd := rand.New(rand.NewPCG(1, 2))
		for round, doc := range docs {
			var wg sync.WaitGroup
			if round >= rounds/2 {
				seedRaw(t, db, seeds[round])
				for i := range runs[round] {
					wg.Go(func() {
						res, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 1})
						if err != nil {
							fail(lin{id: "MigrateAll"}, err)
						}
						runs[round][i] = res
					})
				}
			}
			ops := make([][]lin, workers)
			for w := range ops {
				for i := range perRound {
					// Get 25%, peek 10%, inc 20%, setFirst 20%, oldInc 15%, rawInc 10%.
					in := doc
					in.kind = [20]opKind{0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5}[rnd.IntN(20)]
					if in.kind == opSetFirst {
						in.first = fmt.Sprintf("R%dW%dI%d", round, w, i)
					}
					ops[w] = append(ops[w], in)
				}
			}
			for w, ins := range ops {
				wg.Go(func() {
					for _, in := range ins {
						do(w, in)
					}
				})
			}
			wg.Wait()
		}
		require.Empty(t, unexpected, "no operation failed but as its godoc allows")
		linear.Check(t, readsOnlyDefined(versioningModel), &h, 30*time.Second)

		// Every document at the current version, each step applied once
		// to what is stored.
		want := map[string]TracedUser{}
		for _, doc := range docs {
			u, err := r.Get(ctx, doc.id)
			require.NoError(t, err)
			require.Equal(t, linUser(doc.id, doc.v2, logical{visits: u.Visits, first: u.First}), u)
			want[doc.id] = u
		}
		requireUsers(t, db, want)
		for round, rs := range runs {
			for _, res := range rs {
				require.Empty(t, res.Failed)
				require.LessOrEqual(t, res.Migrated+res.Skipped, 1, "round %d: the run meets one old document at most", round)
			}
			require.LessOrEqual(t, rs[0].Migrated+rs[1].Migrated, 1, "round %d: the document is migrated by one writer: %+v", round, rs)
		}
		mongotest.Detail(t, "%d operations by %d goroutines on %d documents; MigrateAll runs %+v", h.Len(), workers, rounds, runs[rounds/2:])
	})
}

// readsOnlyDefined is m where a read that failed (recorded as unknown,
// and reported as a failure of the test) constrains nothing: the history
// stays checkable while the test reports the error.
func readsOnlyDefined(m porcupine.NondeterministicModel) porcupine.Model {
	step := m.Step
	m.Step = func(state, input, output any) []any {
		if in := input.(lin); (in.kind == opGet || in.kind == opPeek) && output.(outcome).unknown {
			return []any{state}
		}
		return step(state, input, output)
	}
	return m.ToModel()
}
