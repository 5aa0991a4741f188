package chaos

import (
	"errors"
	"testing"

	"github.com/anishathalye/porcupine"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Named is an error a package's godoc gives callers, with the name its
// model knows it by.
type Named struct {
	Name string
	Err  error
}

// Outcome names what err reports, as a model reads it: "ok" for nil, the
// name of the first of named that err wraps (a package's own sentinel,
// checked first), "notfound", "conflict", or "dup" (the server's
// duplicate key). Any other error is returned: a fault's (or the
// deadline's), whose outcome is unknown ([Spec.Do]).
func Outcome(err error, named ...Named) (string, error) {
	if err == nil {
		return "ok", nil
	}
	for _, n := range append(named, Named{"notfound", patterns.ErrNotFound}, Named{"conflict", patterns.ErrConflict}) {
		if errors.Is(err, n.Err) {
			return n.Name, nil
		}
	}
	if mongo.IsDuplicateKeyError(err) {
		return "dup", nil
	}
	return "", err
}

// ModelCase is a history a model must accept (OK) or reject.
type ModelCase struct {
	Name    string
	History []porcupine.Operation
	OK      bool
}

// CheckModel requires model to decide each case as it says: the test of
// a model, that it rejects what it is for and accepts the weaknesses the
// godoc names.
func CheckModel(t *testing.T, model porcupine.Model, cases []ModelCase) {
	t.Helper()
	for _, c := range cases {
		if got := porcupine.CheckOperations(model, c.History); got != c.OK {
			t.Errorf("%s: the model accepts it: %t, want %t", c.Name, got, c.OK)
		}
	}
}
