package console

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// historyPage is how many revisions the resource page shows.
const historyPage = 20

type resourceView struct {
	row
	Uid      string            `json:"uid"`
	Version  string            `json:"version"`
	Data     json.RawMessage   `json:"data"`
	DataType string            `json:"dataType"`
	Metadata map[string]string `json:"metadata"`
	Owner    *linkView         `json:"owner,omitempty"`
	Owned    []linkView        `json:"owned"`
	History  []revisionView    `json:"history"`
	// HistoryNote says why History is empty when it is not kept or not
	// readable.
	HistoryNote string `json:"historyNote,omitempty"`
}

// linkView names a resource the page links to.
type linkView struct {
	Type      string `json:"type"`
	Partition string `json:"partition"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type revisionView struct {
	Version    string    `json:"version"`
	Time       time.Time `json:"time"`
	By         string    `json:"by"`
	Generation string    `json:"generation"`
	Deleted    bool      `json:"deleted"`
}

func linkOf(id *pbresource.ID) linkView {
	return linkView{Type: resource.TypeString(id.GetType()), Partition: id.GetTenancy().GetPartition(),
		Namespace: id.GetTenancy().GetNamespace(), Name: id.GetName()}
}

// resource answers a resource page.
func (c *Console) resource(r *http.Request, token string) (any, error) {
	q := r.URL.Query()
	typ, err := resource.ParseType(q.Get("type"))
	if err != nil {
		return nil, errBadRequest{err.Error()}
	}
	id := &pbresource.ID{Type: typ, Name: q.Get("name"),
		Tenancy: &pbresource.Tenancy{Partition: q.Get("partition"), Namespace: q.Get("namespace")}}
	ctx := userContext(r.Context(), token)
	read, err := c.cfg.Client.Read(ctx, &pbresource.ReadRequest{Id: id})
	if err != nil {
		return nil, err
	}
	res := read.GetResource()
	v := resourceView{row: rowOf(res), Uid: res.GetId().GetUid(), Version: res.GetVersion(),
		DataType: res.GetData().GetTypeUrl(), Metadata: res.GetMetadata(), Owned: []linkView{}, History: []revisionView{}}
	v.Data = dataJSON(res)
	if res.GetOwner() != nil {
		l := linkOf(res.GetOwner())
		v.Owner = &l
	}
	// What the token may not list of the owned resources is left out.
	if owned, err := c.cfg.Client.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: res.GetId()}); err == nil {
		for _, o := range owned.GetResources() {
			v.Owned = append(v.Owned, linkOf(o.GetId()))
		}
	}
	c.addHistory(ctx, &v, res.GetId())
	return v, nil
}

// dataJSON renders res's data as JSON, or says why it cannot.
func dataJSON(res *pbresource.Resource) json.RawMessage {
	if res.GetData() == nil {
		return json.RawMessage("null")
	}
	msg, err := res.GetData().UnmarshalNew()
	if err == nil {
		var b []byte
		if b, err = (protojson.MarshalOptions{Multiline: true, Indent: "  "}).Marshal(msg); err == nil {
			return b
		}
	}
	b, _ := json.Marshal(map[string]string{"undecodable": "this binary does not know " + res.GetData().GetTypeUrl()})
	return b
}

func (c *Console) addHistory(ctx context.Context, v *resourceView, id *pbresource.ID) {
	if c.cfg.History == nil {
		v.HistoryNote = "this server keeps no history"
		return
	}
	id = proto.CloneOf(id)
	id.Uid = ""
	revs, err := c.cfg.History.ListRevisions(ctx, &pbhistoryv1.ListRevisionsRequest{Id: id, PageSize: historyPage})
	if err != nil {
		v.HistoryNote = "history: " + status.Convert(err).Message()
		return
	}
	for _, rev := range revs.GetRevisions() {
		v.History = append(v.History, revisionView{Version: rev.GetVersion(), Time: rev.GetTime().AsTime(),
			By: rev.GetBy(), Generation: rev.GetResource().GetGeneration(), Deleted: rev.GetDeleted()})
	}
}
