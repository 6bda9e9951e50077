package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// sample is a series of measurements of one row, with the errors of the
// runs that failed.
type sample struct {
	vals []float64
	errs []string
}

func (s *sample) add(v float64) { s.vals = append(s.vals, v) }

func (s *sample) fail(err error) {
	if err != nil {
		s.errs = append(s.errs, err.Error())
	}
}

// ok reports whether any run succeeded.
func (s *sample) ok() bool { return s != nil && len(s.vals) > 0 }

// quantile returns the q-quantile (0..1) of vals by linear interpolation.
func quantile(vals []float64, q float64) float64 {
	if len(vals) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return s[lo]
	}
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

func (s *sample) median() float64 { return quantile(s.vals, 0.5) }
func (s *sample) min() float64    { return quantile(s.vals, 0) }
func (s *sample) max() float64    { return quantile(s.vals, 1) }

// ms renders a duration-valued sample (in ms) as "median (min–max)".
func (s *sample) ms() string {
	if !s.ok() {
		return s.failed()
	}
	return fmt.Sprintf("%s (%s–%s)%s", fmtMS(s.median()), fmtMS(s.min()), fmtMS(s.max()), s.partial())
}

// ratio renders a ratio sample as "median (min–max)".
func (s *sample) ratio() string {
	if !s.ok() {
		return s.failed()
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)%s", s.median(), s.min(), s.max(), s.partial())
}

// num renders a sample with a format for each value.
func (s *sample) num(format string) string {
	if !s.ok() {
		return s.failed()
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")%s", s.median(), s.min(), s.max(), s.partial())
}

// partial notes runs that failed beside those that succeeded.
func (s *sample) partial() string {
	if len(s.errs) == 0 {
		return ""
	}
	return fmt.Sprintf(" [%d failed]", len(s.errs))
}

func (s *sample) failed() string {
	if s == nil || len(s.errs) == 0 {
		return "—"
	}
	return "FAILED"
}

func fmtMS(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// verdict compares a median with a target: "✅" within, "❌" over.
func verdict(v, target float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v <= target:
		return "✅ within"
	default:
		return "❌ over"
	}
}

// oneLine shortens an error message for a table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// minVerdictRounds is how many interleaved rounds a verdict on a target
// measured round by round needs (issue 40): targets sit close to their
// line, and one round's drift moves the median of fewer across it.
const minVerdictRounds = 7

// roundTarget renders a target measured round by round: the median with
// its spread and the number of rounds, and the verdict on the median —
// none (a dash saying so) from fewer than minVerdictRounds rounds.
func roundTarget(s *sample, format string, target float64) (measured, verdictCell string) {
	if !s.ok() {
		return s.failed(), "—"
	}
	rounds := fmt.Sprintf("%d rounds", len(s.vals))
	if len(s.vals) == 1 {
		rounds = "1 round"
	}
	measured = fmt.Sprintf(format+" ("+format+"–"+format+"), %s", s.median(), s.min(), s.max(), rounds)
	if len(s.vals) < minVerdictRounds {
		return measured, fmt.Sprintf("— (%s; a verdict needs %d)", rounds, minVerdictRounds)
	}
	return measured, verdict(s.median(), target)
}
