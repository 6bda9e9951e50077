package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsync/podsync/engine/store"
)

// Names of the store's metrics; docs/metrics.md describes each.
const (
	MetricStoreWrites  = "podsync_store_writes_total"
	MetricStoreCommits = "podsync_store_commits_total"
	MetricStoreSyncs   = "podsync_store_syncs_total"
)

// StoreStats is what the store's metrics read at scrape time: a
// *store.Store.
type StoreStats interface {
	Stats() store.Stats
}

// RegisterStore registers the store's metrics on reg: its writes, the
// bbolt commits they took and the syncs of its file, read from st at
// scrape time. It fails if reg holds metrics of the same names.
func RegisterStore(reg prometheus.Registerer, st StoreStats) error {
	if err := reg.Register(&storeCollector{st: st,
		writes: prometheus.NewDesc(MetricStoreWrites,
			"Writes of the store committed (a pod's spec, status and events, deletions, objects, leases); writes that share a commit count one each.", nil, nil),
		commits: prometheus.NewDesc(MetricStoreCommits,
			"Write transactions of the store committed (bbolt commits); concurrent writes share them.", nil, nil),
		syncs: prometheus.NewDesc(MetricStoreSyncs,
			"fdatasync and fsync calls on the store's file: two a commit (pages, then meta page) and one a commit that grew the file.", nil, nil),
	}); err != nil {
		return fmt.Errorf("register store metrics: %w", err)
	}
	return nil
}

type storeCollector struct {
	st                     StoreStats
	writes, commits, syncs *prometheus.Desc
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.writes
	ch <- c.commits
	ch <- c.syncs
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	ch <- prometheus.MustNewConstMetric(c.writes, prometheus.CounterValue, float64(s.Writes))
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(c.syncs, prometheus.CounterValue, float64(s.Syncs))
}
