package failpoint

import (
	"testing"

	"go.uber.org/goleak"
)

// mainWithLeakCheck runs the tests and checks that no goroutine leaked.
func mainWithLeakCheck(m *testing.M) {
	goleak.VerifyTestMain(m)
}
