package conformance

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
)

// Area is one area of the suite (its sig and the tests' subject, such as
// "[sig-node] Probing container" or "[sig-storage] EmptyDir volumes")
// and how its tests ended.
type Area struct {
	Name    string
	Summary Summary
}

// Areas groups the tests that ran (passed or failed) by area, in name
// order. A test's area is its sig and the capitalised words after it,
// up to the first that is not ("[sig-node] Container Lifecycle Hook when
// create a pod …" is "[sig-node] Container Lifecycle Hook"); a tag such
// as "[DRA]" counts as capitalised.
func Areas(results []Result) []Area {
	byName := map[string]*Summary{}
	for _, r := range results {
		if r.Outcome == Skipped {
			continue
		}
		name := areaOf(r.Name)
		s := byName[name]
		if s == nil {
			s = &Summary{}
			byName[name] = s
		}
		if r.Outcome == Passed {
			s.Passed++
		} else {
			s.Failed++
		}
	}
	out := make([]Area, 0, len(byName))
	for name, s := range byName {
		out = append(out, Area{Name: name, Summary: *s})
	}
	slices.SortFunc(out, func(a, b Area) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// areaOf is a test name's area.
func areaOf(name string) string {
	words := strings.Fields(name)
	if len(words) == 0 || !strings.HasPrefix(words[0], "[sig-") {
		return name
	}
	n := 1
	for n < len(words) {
		w := []rune(strings.TrimPrefix(words[n], "["))
		if len(w) == 0 || !unicode.IsUpper(w[0]) || words[n] == "When" {
			break
		}
		n++
	}
	return strings.Join(words[:n], " ")
}

// WriteAreas writes the areas as a Markdown table: tests run, passed and
// failed in each, and the totals.
func WriteAreas(w io.Writer, areas []Area) error {
	if _, err := fmt.Fprintf(w, "| area | tests | passed | failed |\n|---|---|---|---|\n"); err != nil {
		return err
	}
	var total Summary
	for _, a := range areas {
		total.Passed += a.Summary.Passed
		total.Failed += a.Summary.Failed
		if _, err := fmt.Fprintf(w, "| %s | %d | %d | %d |\n", a.Name, a.Summary.Passed+a.Summary.Failed, a.Summary.Passed, a.Summary.Failed); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "| all | %d | %d | %d |\n", total.Passed+total.Failed, total.Passed, total.Failed)
	return err
}
