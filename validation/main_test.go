package validation_test

import (
	"testing"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }
