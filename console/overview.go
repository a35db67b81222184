package console

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"time"

	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

type overviewView struct {
	Host        hostView         `json:"host"`
	Types       []typeView       `json:"types"`
	Controllers []controllerView `json:"controllers"`
}

type hostView struct {
	Version string    `json:"version"`
	Backend string    `json:"backend"`
	Started time.Time `json:"started"`
	Uptime  string    `json:"uptime"`
}

type typeView struct {
	Type     string `json:"type"`
	Scope    string `json:"scope"`
	Count    *int64 `json:"count,omitempty"` // nil: the store keeps no counts
	Deleting int64  `json:"deleting"`
}

type controllerView struct {
	Name          string     `json:"name"`
	ManagedType   string     `json:"managedType"`
	Watches       []string   `json:"watches"`
	State         string     `json:"state"`
	Primed        bool       `json:"primed"`
	QueueDepth    int        `json:"queueDepth"`
	ReconcileRate float64    `json:"reconcileRate"`
	ErrorRate     float64    `json:"errorRate"`
	LastError     string     `json:"lastError,omitempty"`
	LastErrorAt   *time.Time `json:"lastErrorAt,omitempty"`
}

// overview answers the overview page: the types the token may read, with
// their counts, the controllers of those types, and the host.
func (c *Console) overview(r *http.Request, token string) (any, error) {
	ctx := userContext(r.Context(), token)
	types, err := c.cfg.Catalog.ListTypes(ctx, &pbcatalogv1.ListTypesRequest{})
	if err != nil {
		return nil, err
	}
	out := overviewView{
		Host: hostView{Version: c.cfg.Host.Version, Backend: c.cfg.Host.Backend, Started: c.cfg.Host.Started,
			Uptime: time.Since(c.cfg.Host.Started).Round(time.Second).String()},
		Types:       []typeView{},
		Controllers: []controllerView{},
	}
	counts := map[string]*pbcatalogv1.TypeCount{}
	if stats, err := c.cfg.Catalog.GetStats(ctx, &pbcatalogv1.GetStatsRequest{}); err == nil {
		for _, tc := range stats.GetCounts() {
			counts[resource.UnversionedTypeString(tc.GetType())] = tc
		}
	} else {
		counts = nil // no counts kept: shown as unknown
	}
	visible := map[string]bool{}
	for _, t := range types.GetTypes() {
		if !t.GetRead() && !t.GetList() {
			continue
		}
		key := resource.UnversionedTypeString(t.GetType())
		visible[key] = true
		v := typeView{Type: resource.TypeString(t.GetType()), Scope: t.GetScope()}
		if counts != nil {
			n := counts[key].GetResources()
			v.Count, v.Deleting = &n, counts[key].GetMarkedForDeletion()
		}
		out.Types = append(out.Types, v)
	}
	now := time.Now()
	for _, ctl := range c.cfg.Controllers() {
		if !visible[resource.UnversionedTypeString(ctl.ManagedType)] {
			continue
		}
		reconciles, errors := c.rates.of(ctl.Name, now, ctl.Reconciles, ctl.Errors)
		v := controllerView{Name: ctl.Name, ManagedType: resource.TypeString(ctl.ManagedType), Watches: typeStrings(ctl.Watches),
			State: ctl.State, Primed: ctl.Primed, QueueDepth: ctl.QueueDepth,
			ReconcileRate: reconciles, ErrorRate: errors, LastError: ctl.LastError}
		if !ctl.LastErrorAt.IsZero() {
			at := ctl.LastErrorAt
			v.LastErrorAt = &at
		}
		out.Controllers = append(out.Controllers, v)
	}
	sortBy(out.Controllers, func(v controllerView) string { return v.Name })
	return out, nil
}

func typeStrings(ts []*pbresource.Type) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, resource.TypeString(t))
	}
	return out
}

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
}

// rateWindow is the shortest interval over which rates are measured.
const rateWindow = time.Second

// rates turns the controllers' totals into per-second rates, measured
// between the overview requests at least rateWindow apart (the last rate
// measured stands in between).
type rates struct {
	mu   sync.Mutex
	last map[string]rateSample
}

type rateSample struct {
	at                 time.Time
	reconciles, errors float64
	reconcileRate      float64
	errorRate          float64
}

func (r *rates) init() { r.last = map[string]rateSample{} }

func (r *rates) of(name string, now time.Time, reconciles, errors float64) (float64, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.last[name]
	if !ok {
		r.last[name] = rateSample{at: now, reconciles: reconciles, errors: errors}
		return 0, 0
	}
	if d := now.Sub(prev.at); d >= rateWindow {
		prev.reconcileRate = max(0, reconciles-prev.reconciles) / d.Seconds()
		prev.errorRate = max(0, errors-prev.errors) / d.Seconds()
		prev.at, prev.reconciles, prev.errors = now, reconciles, errors
		r.last[name] = prev
	}
	return prev.reconcileRate, prev.errorRate
}
