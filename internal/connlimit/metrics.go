package connlimit

import "github.com/prometheus/client_golang/prometheus"

var (
	maxDesc = prometheus.NewDesc("loom_connections_max",
		"Most connections the listener holds open at a time.", []string{"listener"}, nil)
	openDesc = prometheus.NewDesc("loom_connections_open",
		"Connections the listener holds open.", []string{"listener"}, nil)
	refusedDesc = prometheus.NewDesc("loom_connections_refused_total",
		"Connections closed at accept because the listener held its most already and none was idle.", []string{"listener"}, nil)
	evictedDesc = prometheus.NewDesc("loom_connections_evicted_total",
		"Idle connections (HTTP keep-alives) closed to make room for new ones.", []string{"listener"}, nil)
)

// Collector serves the counts of Listeners, by the name of each (the
// "listener" label), as Prometheus metrics read once per scrape. Nil
// Listeners are left out.
type Collector map[string]*Listener

// Describe sends the metrics' descriptions.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- maxDesc
	ch <- openDesc
	ch <- refusedDesc
	ch <- evictedDesc
}

// Collect sends the Listeners' counts.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c {
		if l == nil {
			continue
		}
		s := l.Stats()
		ch <- prometheus.MustNewConstMetric(maxDesc, prometheus.GaugeValue, float64(s.Max), name)
		ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(s.Open), name)
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(s.Refused), name)
		ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(s.Evicted), name)
	}
}
