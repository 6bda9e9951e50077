package failpoint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what an armed failpoint does.
type Kind int

const (
	// Exit kills the process with SIGKILL, at once or Action.Duration
	// later.
	Exit Kind = iota + 1
	// Sleep sleeps for Action.Duration.
	Sleep
	// Hang blocks the calling goroutine until the process ends.
	Hang
	// Off turns off the check a point guards: Skip reports true for it
	// (a scratch build that must fail a test: the robustness test's
	// preconditions).
	Off
)

// Action is an armed failpoint's action.
type Action struct {
	Kind Kind
	// Duration is how long a Sleep sleeps, or how long after the hit an
	// Exit kills the process (while the caller goes on).
	Duration time.Duration
	// Hit is the one hit the action runs on, counting from 1; 0 means
	// every hit.
	Hit int64
}

// String renders a as PODSYNC_FAILPOINTS spells it.
func (a Action) String() string {
	var s string
	switch a.Kind {
	case Exit:
		s = "exit"
		if a.Duration > 0 {
			s += "(" + a.Duration.String() + ")"
		}
	case Sleep:
		s = "sleep(" + a.Duration.String() + ")"
	case Hang:
		s = "hang"
	case Off:
		s = "off"
	default:
		s = "unknown"
	}
	if a.Hit > 0 {
		s += "@" + strconv.FormatInt(a.Hit, 10)
	}
	return s
}

// Parse parses a PODSYNC_FAILPOINTS value: name=action[@N] items separated
// by ';' (see the package documentation). It returns an error for an
// unknown name, a name given twice, or an action that does not parse.
func Parse(spec string) (map[string]Action, error) {
	out := map[string]Action{}
	for item := range strings.SplitSeq(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, ok := strings.Cut(item, "=")
		name, act = strings.TrimSpace(name), strings.TrimSpace(act)
		if !ok || name == "" || act == "" {
			return nil, fmt.Errorf("failpoint %q: want name=action[@N]", item)
		}
		if !slices.Contains(Points(), name) {
			return nil, fmt.Errorf("failpoint %q: unknown name (known: %s)", name, strings.Join(Points(), ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("failpoint %q: armed twice", name)
		}
		a, err := parseAction(act)
		if err != nil {
			return nil, fmt.Errorf("failpoint %q: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}

func parseAction(s string) (Action, error) {
	var a Action
	if body, hit, ok := strings.Cut(s, "@"); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(hit), 10, 64)
		if err != nil || n < 1 {
			return Action{}, fmt.Errorf("action %q: @N needs a hit number of at least 1", s)
		}
		a.Hit, s = n, strings.TrimSpace(body)
	}
	name, arg, hasArg := strings.Cut(s, "(")
	if hasArg {
		if !strings.HasSuffix(arg, ")") {
			return Action{}, fmt.Errorf("action %q: unbalanced parenthesis", s)
		}
		d, err := time.ParseDuration(strings.TrimSuffix(arg, ")"))
		if err != nil {
			return Action{}, fmt.Errorf("action %q: %w", s, err)
		}
		if d < 0 {
			return Action{}, fmt.Errorf("action %q: negative duration", s)
		}
		a.Duration = d
	}
	switch {
	case name == "exit":
		a.Kind = Exit
	case name == "hang" && !hasArg:
		a.Kind = Hang
	case name == "off" && !hasArg:
		a.Kind = Off
	case name == "sleep" && hasArg:
		a.Kind = Sleep
	default:
		return Action{}, errors.New("action " + strconv.Quote(s) + ": want exit, exit(DURATION), sleep(DURATION), hang or off")
	}
	return a, nil
}
