//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Enabled reports whether failpoints are compiled in (build tag
// failpoints).
const Enabled = true

// armedPoint is an armed failpoint and its hits so far.
type armedPoint struct {
	Action
	hits atomic.Int64
}

// armed are the points PODSYNC_FAILPOINTS arms, read once at start; the
// map is never written after.
var armed = arm(os.Getenv(EnvVar))

func arm(spec string) map[string]*armedPoint {
	acts, err := Parse(spec)
	if err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "podsync: %s: %v\n", EnvVar, err)
		os.Exit(2)
	}
	out := make(map[string]*armedPoint, len(acts))
	for name, a := range acts {
		out[name] = &armedPoint{Action: a}
	}
	if len(out) > 0 {
		_, _ = fmt.Fprintf(os.Stderr, "podsync failpoints armed: %s\n", spec)
	}
	return out
}

// Inject runs the action of the failpoint name if it is armed and this is
// the hit it fires on; see the package documentation.
func Inject(name string) {
	p := armed[name]
	if p == nil {
		return
	}
	if p.Kind == Off {
		return
	}
	n := p.hits.Add(1)
	if p.Hit > 0 && n != p.Hit {
		return
	}
	_, _ = fmt.Fprintf(os.Stderr, "podsync failpoint %s fired on hit %d: %s\n", name, n, p.Action)
	switch p.Kind {
	case Exit:
		if p.Duration > 0 {
			// The caller goes on: the process dies in the middle of
			// whatever follows, such as a CRI call in flight.
			go func() {
				time.Sleep(p.Duration)
				die()
			}()
			return
		}
		die()
	case Sleep:
		time.Sleep(p.Duration)
	case Hang:
		for {
			time.Sleep(time.Hour)
		}
	}
}

// Skip reports whether the check the failpoint name guards is turned off
// (armed "off").
func Skip(name string) bool {
	p := armed[name]
	return p != nil && p.Kind == Off
}

// die kills the process with SIGKILL.
func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// The signal kills every thread; should it not, exit as a SIGKILL
	// would be reported.
	time.Sleep(time.Second)
	os.Exit(128 + int(syscall.SIGKILL))
}
