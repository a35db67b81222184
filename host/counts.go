package host

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loomrt/loom/storage"
)

var (
	resourcesDesc = prometheus.NewDesc("loom_resources",
		"Resources stored, by type (group.Kind, every group version together), those marked for deletion and tombstones (type resource.Tombstone) included.",
		[]string{"type"}, nil)
	resourcesMarkedDesc = prometheus.NewDesc("loom_resources_marked_for_deletion",
		"Resources stored that are marked for deletion and wait for their finalizers to be removed, by type.",
		[]string{"type"}, nil)
)

// countsTimeout bounds one scrape's reading of the counts (on etcd, the
// first reading lists the store; later ones read memory).
const countsTimeout = 10 * time.Second

// countsCollector serves a storage.Counter's counts, read once per scrape
// and summed over tenancies. A failed reading is logged and leaves the
// gauges out of that scrape.
type countsCollector struct {
	counter storage.Counter
	logger  hclog.Logger
}

func (c countsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- resourcesDesc
	ch <- resourcesMarkedDesc
}

func (c countsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
	defer cancel()
	counts, err := c.counter.Stats(ctx)
	if err != nil {
		c.logger.Warn("cannot read the counts of resources for /metrics", "error", err)
		return
	}
	// Counts come ordered by type: sum each type's tenancies.
	for i := 0; i < len(counts); {
		typ := counts[i].Type
		var n, marked int64
		for ; i < len(counts) && counts[i].Type == typ; i++ {
			n += counts[i].Resources
			marked += counts[i].Marked
		}
		label := typ.Group + "." + typ.Kind
		ch <- prometheus.MustNewConstMetric(resourcesDesc, prometheus.GaugeValue, float64(n), label)
		ch <- prometheus.MustNewConstMetric(resourcesMarkedDesc, prometheus.GaugeValue, float64(marked), label)
	}
}
