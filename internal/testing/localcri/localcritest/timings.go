package localcritest

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// writeTimings appends the package's line to
// <logDir>/integration-timings.log: its exit code, the instance's start
// stages and how long the tests and the teardown took. go test prints a
// passing package's output only with -v, so the timings are kept in a
// file too. A log that cannot be opened is skipped.
func (r runner) writeTimings(logDir string, inst *localcri.Instance, code int, tests, teardown time.Duration) {
	f, err := os.OpenFile(filepath.Join(logDir, "integration-timings.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(f, "%s package=%s flavour=%s run=%s exit=%d start: %s; tests %s; teardown %s\n",
		time.Now().UTC().Format(time.RFC3339), r.cfg.Package, inst.Flavour(), inst.ID(), code, inst.Stages(),
		tests.Round(time.Millisecond), teardown.Round(time.Millisecond))
	_ = f.Close()
}
