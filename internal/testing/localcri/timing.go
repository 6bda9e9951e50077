package localcri

import (
	"fmt"
	"strings"
	"time"
)

// Stage is one timed step of starting an instance.
type Stage struct {
	// Name says what the step did, e.g. "images" or "containerd ready".
	Name string
	// Duration is how long the step took.
	Duration time.Duration
}

// Stages is the ordered list of timed steps of Start.
type Stages []Stage

// String formats the stages on one line, e.g. "packages 2ms, images 40ms".
func (s Stages) String() string {
	parts := make([]string, 0, len(s))
	var total time.Duration
	for _, st := range s {
		parts = append(parts, fmt.Sprintf("%s %s", st.Name, st.Duration.Round(time.Millisecond)))
		total += st.Duration
	}
	parts = append(parts, fmt.Sprintf("total %s", total.Round(time.Millisecond)))
	return strings.Join(parts, ", ")
}

// stopwatch records stages one after another.
type stopwatch struct {
	stages Stages
	last   time.Time
}

func newStopwatch() *stopwatch { return &stopwatch{last: time.Now()} }

// lap ends the current stage under name and starts the next one.
func (s *stopwatch) lap(name string) time.Duration {
	now := time.Now()
	d := now.Sub(s.last)
	s.stages = append(s.stages, Stage{Name: name, Duration: d})
	s.last = now
	return d
}
