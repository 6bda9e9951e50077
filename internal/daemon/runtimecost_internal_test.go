package daemon

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestWarnCostlyStatsPeriod: podsyncd warns once of containerd 2.x's
// background stats reader when it runs more often than every 10 s (its
// default, unset, is 1 s), and never of containerd 1.6, whose key of that
// name is its snapshot period in seconds.
func TestWarnCostlyStatsPeriod(t *testing.T) {
	for _, c := range []struct {
		name, config string
		warn         bool
		period       time.Duration
	}{
		{"containerd 2.x default", `{"statsCollectPeriod":"","statsRetentionPeriod":"","rootDir":"/var/lib/containerd"}`, true, time.Second},
		{"containerd 2.x 2s", `{"statsCollectPeriod":"2s"}`, true, 2 * time.Second},
		{"containerd 2.x 10s", `{"statsCollectPeriod":"10s"}`, false, 0},
		{"containerd 2.x 1m", `{"statsCollectPeriod":"1m"}`, false, 0},
		{"containerd 1.6", `{"statsCollectPeriod":10,"rootDir":"/var/lib/containerd"}`, false, 0},
		{"no such key", `{"rootDir":"/var/lib/containerd"}`, false, 0},
		{"not json", `{`, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			warnCostlyStatsPeriod(t.Context(), statusRuntime{config: c.config}, zap.New(core))
			got := logs.FilterMessageSnippet("stats_collect_period").All()
			if !c.warn {
				if len(got) != 0 {
					t.Fatalf("warned: %v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Level != zap.WarnLevel {
				t.Fatalf("want one warning, got %v", logs.All())
			}
			if p := got[0].ContextMap()["stats_collect_period"]; p != c.period {
				t.Errorf("stats_collect_period = %v, want %s", p, c.period)
			}
		})
	}
}
