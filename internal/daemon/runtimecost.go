package daemon

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"
	cri "k8s.io/cri-api/pkg/apis"

	"github.com/podsync/podsync/logx"
)

// CheapStatsCollectPeriod is the shortest containerd 2.x
// stats_collect_period podsyncd does not warn of: the kubelet's cAdvisor
// housekeeping interval (docs/runtime-cost.md).
const CheapStatsCollectPeriod = 10 * time.Second

// containerdDefaultStatsCollectPeriod is what containerd 2.x's CRI plugin
// uses when stats_collect_period is unset.
const containerdDefaultStatsCollectPeriod = time.Second

// statsCollectPeriod reads containerd's stats_collect_period from the CRI
// Status verbose info's "config". containerd 2.x reports its CRI runtime
// plugin's background stats reader there as a duration string ("" is its
// default of one second); containerd 1.6 reports a number under the same
// key, the period of its snapshot usage walk, and has no such reader.
// ok is false when the runtime reports no such reader.
func statsCollectPeriod(info map[string]string) (period time.Duration, ok bool) {
	var c struct {
		StatsCollectPeriod json.RawMessage `json:"statsCollectPeriod"`
	}
	if json.Unmarshal([]byte(info["config"]), &c) != nil || len(c.StatsCollectPeriod) == 0 {
		return 0, false
	}
	var s string
	if json.Unmarshal(c.StatsCollectPeriod, &s) != nil {
		return 0, false // a number: containerd 1.6's snapshot period
	}
	if s == "" {
		return containerdDefaultStatsCollectPeriod, true
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	return d, true
}

// warnCostlyStatsPeriod logs one warning when the runtime reads every
// container's and pod cgroup's stats in the background more often than
// CheapStatsCollectPeriod: containerd 2.x's default of one second costs
// containerd and its shims more CPU on an idle node than all else they do.
// podsyncd cannot change the runtime's configuration; the operator can.
func warnCostlyStatsPeriod(ctx context.Context, rt cri.RuntimeService, log *zap.Logger) {
	resp, err := rt.Status(ctx, true)
	if err != nil {
		return // runNode's other Status calls report an unavailable runtime
	}
	if d, ok := statsCollectPeriod(resp.GetInfo()); ok && d < CheapStatsCollectPeriod {
		log.Warn(`containerd reads the stats of every container and pod cgroup in the background more often than every 10s, `+
			`which costs it CPU on every idle pod; set stats_collect_period = "10s" under [plugins.'io.containerd.cri.v1.runtime'] `+
			`in containerd's config (docs/runtime-cost.md)`, zap.Duration(logx.StatsCollectPeriod, d))
	}
}
