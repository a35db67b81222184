package console

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loomrt/loom/condition"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
)

// rowKey orders a type's resources on its pages: by partition, namespace
// and name.
func rowKey(id *pbresource.ID) string {
	t := id.GetTenancy()
	return t.GetPartition() + "/" + t.GetNamespace() + "/" + id.GetName()
}

// filter is a type page's filters.
type filter struct {
	prefix, partition, namespace string
	sel                          selector.Selector
}

func (f filter) matches(res *pbresource.Resource) bool {
	id := res.GetId()
	return strings.HasPrefix(id.GetName(), f.prefix) &&
		(f.partition == "" || id.GetTenancy().GetPartition() == f.partition) &&
		(f.namespace == "" || id.GetTenancy().GetNamespace() == f.namespace) &&
		f.sel.Matches(res.GetMetadata())
}

// typeAndFilter reads a type page's parameters.
func typeAndFilter(r *http.Request) (*pbresource.Type, filter, error) {
	q := r.URL.Query()
	typ, err := resource.ParseType(q.Get("type"))
	if err != nil {
		return nil, filter{}, errBadRequest{err.Error()}
	}
	sel, err := selector.Parse(q.Get("selector"))
	if err != nil {
		return nil, filter{}, errBadRequest{"selector: " + err.Error()}
	}
	return typ, filter{prefix: q.Get("prefix"), partition: q.Get("partition"), namespace: q.Get("namespace"), sel: sel}, nil
}

// intParam reads a non-negative integer parameter, def when absent.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errBadRequest{name + " must be a non-negative integer"}
	}
	return n, nil
}

// row is one resource as a type page shows it.
type row struct {
	Key          string       `json:"key"`
	Type         string       `json:"type"`
	Name         string       `json:"name"`
	Partition    string       `json:"partition"`
	Namespace    string       `json:"namespace"`
	Created      *time.Time   `json:"created,omitempty"`
	Generation   string       `json:"generation"`
	GenerationAt *time.Time   `json:"generationAt,omitempty"`
	Statuses     []statusView `json:"statuses"`
	Finalizers   []string     `json:"finalizers"`
	Deleting     string       `json:"deleting,omitempty"`
}

type statusView struct {
	Key                string          `json:"key"`
	ObservedGeneration string          `json:"observedGeneration"`
	Observed           bool            `json:"observed"`
	Conditions         []conditionView `json:"conditions"`
}

type conditionView struct {
	Type    string `json:"type"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ulidTime is when the ULID s was made; nil if s is none.
func ulidTime(s string) *time.Time {
	u, err := ulid.ParseStrict(s)
	if err != nil {
		return nil
	}
	t := ulid.Time(u.Time()).UTC()
	return &t
}

func rowOf(res *pbresource.Resource) row {
	id := res.GetId()
	r := row{
		Key:          rowKey(id),
		Type:         resource.TypeString(id.GetType()),
		Name:         id.GetName(),
		Partition:    id.GetTenancy().GetPartition(),
		Namespace:    id.GetTenancy().GetNamespace(),
		Created:      ulidTime(id.GetUid()),
		Generation:   res.GetGeneration(),
		GenerationAt: ulidTime(res.GetGeneration()),
		Statuses:     statusesOf(res),
		Finalizers:   resource.Finalizers(res),
		Deleting:     res.GetMetadata()[resource.DeletionTimestampKey],
	}
	if r.Finalizers == nil {
		r.Finalizers = []string{}
	}
	return r
}

// statusesOf returns res's statuses by key.
func statusesOf(res *pbresource.Resource) []statusView {
	out := make([]statusView, 0, len(res.GetStatus()))
	for key, st := range res.GetStatus() {
		v := statusView{Key: key, ObservedGeneration: st.GetObservedGeneration(),
			Observed: st.GetObservedGeneration() == res.GetGeneration(), Conditions: []conditionView{}}
		for _, c := range st.GetConditions() {
			v.Conditions = append(v.Conditions, conditionView{Type: c.GetType(), State: condition.StateName(c.GetState()), Reason: c.GetReason(), Message: c.GetMessage()})
		}
		out = append(out, v)
	}
	sortBy(out, func(s statusView) string { return s.Key })
	return out
}

// upsertMessage is the server-sent event of res changed or added.
func upsertMessage(res *pbresource.Resource) []byte {
	b, _ := json.Marshal(rowOf(res))
	return sseMessage("upsert", b)
}

// deleteMessage is the server-sent event of the resource of key gone.
func deleteMessage(key string) []byte {
	b, _ := json.Marshal(key)
	return sseMessage("delete", b)
}

func sseMessage(event string, data []byte) []byte {
	msg := make([]byte, 0, len(event)+len(data)+16)
	msg = append(msg, "event: "...)
	msg = append(msg, event...)
	msg = append(msg, "\ndata: "...)
	msg = append(msg, data...)
	return append(msg, "\n\n"...)
}

type pageView struct {
	Total  int   `json:"total"`
	Offset int   `json:"offset"`
	Rows   []row `json:"rows"`
}

// rows answers a type page: a window of its resources.
func (c *Console) rows(r *http.Request, token string) (any, error) {
	typ, f, err := typeAndFilter(r)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 50)
	if err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), pageLimit)
	w, err := c.watch.acquire(r.Context(), typ, token)
	if err != nil {
		return nil, err
	}
	defer w.release()
	res, total := w.page(f, offset, limit)
	out := pageView{Total: total, Offset: offset, Rows: make([]row, 0, len(res))}
	for _, r := range res {
		out.Rows = append(out.Rows, rowOf(r))
	}
	return out, nil
}

// sseHeartbeat is how often an idle live stream sends a comment, so that
// proxies and the browser see it alive.
const sseHeartbeat = 15 * time.Second

// events streams the changes within a type page's window as server-sent
// events: "upsert" (a row), "delete" (a key), and "resync" when the page
// must be loaded again (the stream then ends).
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	token, err := c.token(r)
	if err == nil {
		err = c.stream(w, r, token)
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(httpStatus(err))
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	}
}

func (c *Console) stream(w http.ResponseWriter, r *http.Request, token string) error {
	typ, f, err := typeAndFilter(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	sw, err := c.watch.acquire(r.Context(), typ, token)
	if err != nil {
		return err
	}
	defer sw.release()
	room, err := intParam(r, "room", pageLimit)
	if err != nil {
		return err
	}
	s := newSubscriber(f, q.Get("from"), q.Get("to"), room)
	sw.subscribe(s)
	defer sw.unsubscribe(s)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(sseHeartbeat))
		if _, err := w.Write(b); err != nil {
			return false
		}
		// The changes waiting already go out in the same flush: one
		// write to the connection per burst, not per change.
		for range subscriberBuffer {
			select {
			case more, ok := <-s.ch:
				if !ok {
					_, _ = w.Write(sseMessage("resync", []byte(`""`)))
					_ = rc.Flush()
					return false
				}
				if _, err := w.Write(more); err != nil {
					return false
				}
				continue
			default:
			}
			break
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": live\n\n")) {
		return nil
	}
	beat := time.NewTicker(sseHeartbeat / 2)
	defer beat.Stop()
	for {
		select {
		case msg, ok := <-s.ch:
			if !ok {
				write(sseMessage("resync", []byte(`""`)))
				return nil
			}
			if !write(msg) {
				return nil
			}
		case <-beat.C:
			if !write([]byte(": ping\n\n")) {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-c.ctx.Done():
			return nil
		}
	}
}
