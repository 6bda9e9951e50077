package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// renderCalls renders podsyncd's CRI calls and sync passes per pod during
// the RunPods, from its metrics.
func renderCalls(w *strings.Builder, fr *flavourResult) {
	keys := map[string]bool{}
	for _, rr := range fr.runs {
		for k := range rr.calls {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return
	}
	sorted := slices.Sorted(maps.Keys(keys))
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("### podsyncd's work per pod during RunPods — containerd %s\n\n", flavourName(fr.flavour))
	p("From podsyncd's metrics (`podsync_cri_request_duration_seconds`, `podsync_sync_pass_duration_seconds`,\n" +
		"`podsync_store_*_total`), counted from the call to the summary. The raw baseline makes 3 CRI calls per pod.\n" +
		"Store writes are a pod's spec (Put) and each pass's status and events (Append); commits are bbolt's\n" +
		"transactions, which concurrent writes share; syncs are the fdatasyncs and fsyncs of the store's file\n" +
		"(two a commit).\n\n")
	p("| per pod |")
	for _, rr := range fr.runs {
		p(" N = %d |", rr.n)
	}
	p("\n|---|")
	for range fr.runs {
		p("---|")
	}
	p("\n")
	for _, k := range sorted {
		name := strings.TrimPrefix(k, "cri/")
		switch k {
		case "passes":
			name = "sync passes"
		case "pass_seconds":
			name = "time in sync passes (s)"
		case "store/writes":
			name = "store writes"
		case "store/commits":
			name = "store commits"
		case "store/syncs":
			name = "store syncs (fdatasync, fsync)"
		}
		p("| %s |", name)
		for _, rr := range fr.runs {
			if s := rr.calls[k]; s != nil {
				p(" %s |", s.num("%.2f"))
			} else {
				p(" — |")
			}
		}
		p("\n")
	}
	p("\n")
}
