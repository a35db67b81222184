package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// stuckView is the Stuck page: what has waited longer than the threshold.
type stuckView struct {
	Threshold string `json:"threshold"`
	// Lagging: resources whose status has not caught up with their
	// generation: a status key observing an older generation, or no
	// status at all on a type a controller manages.
	Lagging []laggingView `json:"lagging"`
	// Deleting: resources marked for deletion, held by finalizers.
	Deleting []deletingView `json:"deleting"`
	// False: resources with a False condition, by status key and reason.
	False []falseGroup `json:"false"`
	// Truncated says a section was cut at its bound, or the scan at its.
	Truncated bool `json:"truncated"`
}

type laggingView struct {
	Resource     linkView   `json:"resource"`
	GenerationAt *time.Time `json:"generationAt"`
	// Keys are the status keys behind (key: observed generation, "" when
	// the key has none), or the controllers managing the type when the
	// resource has no status.
	Keys []string `json:"keys"`
}

type deletingView struct {
	Resource   linkView `json:"resource"`
	Since      string   `json:"since"`
	Finalizers []string `json:"finalizers"`
}

type falseGroup struct {
	Key       string          `json:"key"`
	Reason    string          `json:"reason"`
	Resources []falseResource `json:"resources"`
}

type falseResource struct {
	Resource  linkView `json:"resource"`
	Condition string   `json:"condition"`
	Message   string   `json:"message"`
}

// stuck answers the Stuck page: every type the token may list, read in
// pages (at most stuckScanLimit resources in all).
func (c *Console) stuck(r *http.Request, token string) (any, error) {
	ctx := userContext(r.Context(), token)
	types, err := c.cfg.Catalog.ListTypes(ctx, &pbcatalogv1.ListTypesRequest{})
	if err != nil {
		return nil, err
	}
	managers := map[string][]string{}
	for _, ctl := range c.cfg.Controllers() {
		k := resource.UnversionedTypeString(ctl.ManagedType)
		managers[k] = append(managers[k], ctl.Name)
	}
	s := &stuckScan{now: time.Now(), after: c.cfg.StuckAfter, groups: map[[2]string]int{},
		out: stuckView{Threshold: c.cfg.StuckAfter.String(), Lagging: []laggingView{}, Deleting: []deletingView{}, False: []falseGroup{}}}
	for _, t := range types.GetTypes() {
		if !t.GetList() {
			continue
		}
		if err := c.scanType(ctx, t.GetType(), managers[resource.UnversionedTypeString(t.GetType())], s); err != nil {
			return nil, err
		}
		if s.scanned >= stuckScanLimit {
			s.out.Truncated = true
			break
		}
	}
	return s.out, nil
}

// stuckScan is one Stuck answer being built.
type stuckScan struct {
	now     time.Time
	after   time.Duration
	scanned int
	groups  map[[2]string]int // status key and reason: index in out.False
	out     stuckView
}

func (c *Console) scanType(ctx context.Context, typ *pbresource.Type, managers []string, s *stuckScan) error {
	req := &pbresource.ListRequest{Type: typ, PageSize: 1000,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}}
	for s.scanned < stuckScanLimit {
		page, err := c.cfg.Client.List(ctx, req)
		if err != nil {
			return err
		}
		for _, res := range page.GetResources() {
			s.add(res, managers)
		}
		s.scanned += len(page.GetResources())
		if page.GetNextPageToken() == "" {
			return nil
		}
		req.PageToken = page.GetNextPageToken()
	}
	return nil
}

// add files res under the sections it belongs to.
func (s *stuckScan) add(res *pbresource.Resource, managers []string) {
	if since, ok := res.GetMetadata()[resource.DeletionTimestampKey]; ok {
		if t, err := time.Parse(time.RFC3339, since); err == nil && s.now.Sub(t) > s.after {
			s.addDeleting(deletingView{Resource: linkOf(res.GetId()), Since: since, Finalizers: resource.Finalizers(res)})
		}
	}
	if at := ulidTime(res.GetGeneration()); at != nil && s.now.Sub(*at) > s.after {
		if keys := lagging(res, managers); len(keys) > 0 {
			s.addLagging(laggingView{Resource: linkOf(res.GetId()), GenerationAt: at, Keys: keys})
		}
	}
	for key, st := range res.GetStatus() {
		for _, cond := range st.GetConditions() {
			if cond.GetState() == pbresource.Condition_STATE_FALSE {
				s.addFalse(key, cond, res)
			}
		}
	}
}

// lagging returns what is behind on res: its status keys that observe
// another generation, or, with no status at all, the controllers that
// manage its type.
func lagging(res *pbresource.Resource, managers []string) []string {
	if len(res.GetStatus()) == 0 {
		return managers
	}
	var keys []string
	for key, st := range res.GetStatus() {
		if st.GetObservedGeneration() != res.GetGeneration() {
			keys = append(keys, fmt.Sprintf("%s: %s", key, st.GetObservedGeneration()))
		}
	}
	return keys
}

func (s *stuckScan) addLagging(v laggingView) {
	if len(s.out.Lagging) >= stuckLimit {
		s.out.Truncated = true
		return
	}
	s.out.Lagging = append(s.out.Lagging, v)
}

func (s *stuckScan) addDeleting(v deletingView) {
	if len(s.out.Deleting) >= stuckLimit {
		s.out.Truncated = true
		return
	}
	s.out.Deleting = append(s.out.Deleting, v)
}

func (s *stuckScan) addFalse(key string, cond *pbresource.Condition, res *pbresource.Resource) {
	g := [2]string{key, cond.GetReason()}
	i, ok := s.groups[g]
	if !ok {
		if len(s.out.False) >= stuckLimit {
			s.out.Truncated = true
			return
		}
		i = len(s.out.False)
		s.groups[g] = i
		s.out.False = append(s.out.False, falseGroup{Key: key, Reason: cond.GetReason()})
	}
	if len(s.out.False[i].Resources) >= stuckLimit {
		s.out.Truncated = true
		return
	}
	s.out.False[i].Resources = append(s.out.False[i].Resources,
		falseResource{Resource: linkOf(res.GetId()), Condition: cond.GetType(), Message: cond.GetMessage()})
}
