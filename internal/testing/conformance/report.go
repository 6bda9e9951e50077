package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Outcome is how a test of the suite ended.
type Outcome string

// Outcomes of a test.
const (
	Passed  Outcome = "PASS"
	Failed  Outcome = "FAIL"
	Skipped Outcome = "SKIP"
)

// Result is one test's outcome.
type Result struct {
	Name    string
	Outcome Outcome
	// Message is a failure's first line.
	Message string
	// Seconds is how long it ran.
	Seconds float64
}

// Summary counts the outcomes.
type Summary struct {
	Passed, Failed, Skipped int
}

func (s Summary) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", s.Passed, s.Failed, s.Skipped)
}

// junitSuites is the part of ginkgo's JUnit report read here.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit reads ginkgo's JUnit report: one result per test, sorted by
// name. The suite's own setup and teardown nodes ([SynchronizedBeforeSuite]
// and the like) count as tests when they fail, and not otherwise.
func ReadJUnit(r io.Reader) ([]Result, error) {
	var js junitSuites
	if err := xml.NewDecoder(r).Decode(&js); err != nil {
		return nil, fmt.Errorf("read JUnit report: %w", err)
	}
	var out []Result
	for _, s := range js.Suites {
		for _, c := range s.Cases {
			res := Result{Name: strings.TrimPrefix(c.Name, "[It] "), Seconds: c.Time}
			switch {
			case c.Failure != nil:
				res.Outcome, res.Message = Failed, firstLine(c.Failure.Message, c.Failure.Text)
			case c.Error != nil:
				res.Outcome, res.Message = Failed, firstLine(c.Error.Message, "")
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				res.Outcome = Skipped
			case c.Status == "failed" || c.Status == "panicked" || c.Status == "timedout" || c.Status == "interrupted" || c.Status == "aborted":
				res.Outcome = Failed
			default:
				res.Outcome = Passed
			}
			if strings.HasPrefix(c.Name, "[") && !strings.HasPrefix(c.Name, "[It]") && res.Outcome != Failed {
				continue // a suite node that went well
			}
			out = append(out, res)
		}
	}
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func firstLine(msg, text string) string {
	s := strings.TrimSpace(msg)
	if s == "" {
		s = strings.TrimSpace(text)
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Summarize counts results.
func Summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Outcome {
		case Passed:
			s.Passed++
		case Failed:
			s.Failed++
		case Skipped:
			s.Skipped++
		}
	}
	return s
}

// WriteResults writes one line per result ("PASS <name>", a failure's
// message on the next line, indented) and the summary last.
func WriteResults(w io.Writer, results []Result) error {
	for _, r := range results {
		if _, err := fmt.Fprintf(w, "%s %s\n", r.Outcome, r.Name); err != nil {
			return err
		}
		if r.Outcome == Failed && r.Message != "" {
			if _, err := fmt.Fprintf(w, "     %s\n", r.Message); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", Summarize(results))
	return err
}

// ReadJUnitFile is ReadJUnit of a file.
func ReadJUnitFile(path string) ([]Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return ReadJUnit(f)
}
