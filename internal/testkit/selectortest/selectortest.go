// Package selectortest is the server-level conformance suite of label
// selectors (issue 24): List, ListByOwner and WatchList with a
// label_selector, against a real server over gRPC on a given backend,
// under concurrent writers and across resumed watches. server runs it over
// the in-memory backend, storage/etcd over etcd.
package selectortest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// Run runs the suite, each test on a fresh backend from newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	tests := []struct {
		name string
		run  func(t *testing.T, c pbresource.ResourceServiceClient)
	}{
		{"List", testList},
		{"ListByOwner", testListByOwner},
		{"InvalidSelector", testInvalidSelector},
		{"WatchEnterLeave", testWatchEnterLeave},
		{"WatchRacingWriters", testWatchRacingWriters},
		{"WatchResumeRacingWriters", testWatchResumeRacingWriters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newClient(t, newBackend(t)))
		})
	}
}

// newClient serves a server over backend on an in-memory listener and
// returns a gRPC client of it.
func newClient(t *testing.T, backend storage.Backend) pbresource.ResourceServiceClient {
	reg := resource.NewRegistry()
	if err := foo.RegisterTypes(reg); err != nil {
		t.Fatal(err)
	}
	svc := server.New(server.Config{Backend: backend, Registry: reg})
	gs := grpc.NewServer(svc.ServerOptions()...)
	svc.Register(gs)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { svc.Shutdown(); gs.Stop() })
	conn, err := grpc.NewClient("passthrough:///selectortest",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pbresource.NewResourceServiceClient(conn)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var (
	barType = &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"}
	zipType = &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Zip"}
	anyTen  = &pbresource.Tenancy{Partition: "default", Namespace: "default"}
)

func newBar(name string, labels map[string]string) *pbresource.Resource {
	a, err := anypb.New(&pbfoov1.Bar{Baz: "b"})
	if err != nil {
		panic(err)
	}
	return &pbresource.Resource{
		Id:       &pbresource.ID{Type: barType, Tenancy: anyTen, Name: name},
		Data:     a,
		Metadata: labels,
	}
}

func write(t *testing.T, ctx context.Context, c pbresource.ResourceServiceClient, res *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	rsp, err := c.Write(ctx, &pbresource.WriteRequest{Resource: res})
	if err != nil {
		t.Fatalf("write %s: %v", res.Id.Name, err)
	}
	return rsp.Resource
}

// labelsOf is the labels of the i-th resource of a fixture: team a, b or
// c; tier web on even i; canary on every fifth.
func labelsOf(i int) map[string]string {
	l := map[string]string{"team": string(rune('a' + i%3))}
	if i%2 == 0 {
		l["tier"] = "web"
	}
	if i%5 == 0 {
		l["canary"] = ""
	}
	return l
}

// selectors are the selectors the List tests check against the model.
var selectors = []string{
	"", "team=a", "team==b", "team!=a", "team in (a,c)", "team notin (a)",
	"tier", "!tier", "canary,team=b", "tier=web,team in (b,c),!canary", "nosuch",
}

// names returns the sorted names of rs.
func names(rs []*pbresource.Resource) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Id.Name)
	}
	slices.Sort(out)
	return out
}

// want returns the sorted names of the stored resources sel matches.
func want(stored []*pbresource.Resource, sel string) []string {
	s := selector.MustParse(sel)
	var out []*pbresource.Resource
	for _, r := range stored {
		if s.Matches(r.Metadata) {
			out = append(out, r)
		}
	}
	return names(out)
}

func testList(t *testing.T, c pbresource.ResourceServiceClient) {
	ctx := testContext(t)
	var stored []*pbresource.Resource
	for i := range 30 {
		stored = append(stored, write(t, ctx, c, newBar(fmt.Sprintf("r%02d", i), labelsOf(i))))
	}
	for _, sel := range selectors {
		rsp, err := c.List(ctx, &pbresource.ListRequest{Type: barType, Tenancy: anyTen, LabelSelector: sel})
		if err != nil {
			t.Fatalf("List %q: %v", sel, err)
		}
		if got, want := names(rsp.Resources), want(stored, sel); !slices.Equal(got, want) {
			t.Errorf("List %q = %v, want %v", sel, got, want)
		}
		for _, size := range []uint32{1, 4} {
			got := listPages(t, ctx, size, func(tok string) ([]*pbresource.Resource, string, error) {
				rsp, err := c.List(ctx, &pbresource.ListRequest{Type: barType, Tenancy: anyTen, LabelSelector: sel, PageSize: size, PageToken: tok})
				return rsp.GetResources(), rsp.GetNextPageToken(), err
			})
			if want := want(stored, sel); !slices.Equal(got, want) {
				t.Errorf("List %q in pages of %d = %v, want %v", sel, size, got, want)
			}
		}
	}
	// A token is bound to its selector.
	rsp, err := c.List(ctx, &pbresource.ListRequest{Type: barType, Tenancy: anyTen, LabelSelector: "team=a", PageSize: 2})
	if err != nil || rsp.NextPageToken == "" {
		t.Fatalf("List: %v, token %q", err, rsp.GetNextPageToken())
	}
	_, err = c.List(ctx, &pbresource.ListRequest{Type: barType, Tenancy: anyTen, LabelSelector: "team=b", PageSize: 2, PageToken: rsp.NextPageToken})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("List with another selector's token: %v, want InvalidArgument", err)
	}
}

// listPages reads every page of a listing through list and returns the
// sorted names, checking that no page is larger than size.
func listPages(t *testing.T, ctx context.Context, size uint32, list func(tok string) ([]*pbresource.Resource, string, error)) []string {
	t.Helper()
	var all []*pbresource.Resource
	tok := ""
	for range 1000 {
		rs, next, err := list(tok)
		if err != nil {
			t.Fatalf("page after %q: %v", tok, err)
		}
		if len(rs) > int(size) {
			t.Fatalf("page of %d, asked for %d", len(rs), size)
		}
		all = append(all, rs...)
		if next == "" {
			return names(all)
		}
		tok = next
	}
	t.Fatal("the listing does not end")
	return nil
}

func testListByOwner(t *testing.T, c pbresource.ResourceServiceClient) {
	ctx := testContext(t)
	z, err := anypb.New(&pbfoov1.Zip{Zap: "z"})
	if err != nil {
		t.Fatal(err)
	}
	owner := write(t, ctx, c, &pbresource.Resource{Id: &pbresource.ID{Type: zipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "owner"}, Data: z})
	ref := &pbresource.ID{Type: owner.Id.Type, Tenancy: owner.Id.Tenancy, Name: owner.Id.Name}
	var stored []*pbresource.Resource
	for i := range 20 {
		bar := newBar(fmt.Sprintf("o%02d", i), labelsOf(i))
		bar.Owner = ref
		stored = append(stored, write(t, ctx, c, bar))
	}
	write(t, ctx, c, newBar("unowned", labelsOf(0)))
	for _, sel := range selectors {
		rsp, err := c.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: owner.Id, LabelSelector: sel})
		if err != nil {
			t.Fatalf("ListByOwner %q: %v", sel, err)
		}
		if got, want := names(rsp.Resources), want(stored, sel); !slices.Equal(got, want) {
			t.Errorf("ListByOwner %q = %v, want %v", sel, got, want)
		}
		got := listPages(t, ctx, 3, func(tok string) ([]*pbresource.Resource, string, error) {
			rsp, err := c.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: owner.Id, LabelSelector: sel, PageSize: 3, PageToken: tok})
			return rsp.GetResources(), rsp.GetNextPageToken(), err
		})
		if want := want(stored, sel); !slices.Equal(got, want) {
			t.Errorf("ListByOwner %q in pages = %v, want %v", sel, got, want)
		}
	}
}

func testInvalidSelector(t *testing.T, c pbresource.ResourceServiceClient) {
	ctx := testContext(t)
	owner := &pbresource.ID{Type: zipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "o", Uid: "01ARZ3NDEKTSV4RRFFQ69G5FAV"}
	for _, sel := range []string{"a in (", "finalizers", "deletionTimestamp=x"} {
		_, err := c.List(ctx, &pbresource.ListRequest{Type: barType, Tenancy: anyTen, LabelSelector: sel})
		checkInvalid(t, "List", sel, err)
		_, err = c.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: owner, LabelSelector: sel})
		checkInvalid(t, "ListByOwner", sel, err)
		stream, err := c.WatchList(ctx, &pbresource.WatchListRequest{Type: barType, Tenancy: anyTen, LabelSelector: sel})
		if err == nil {
			_, err = stream.Recv()
		}
		checkInvalid(t, "WatchList", sel, err)
	}
}

func checkInvalid(t *testing.T, rpc, sel string, err error) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "label_selector") {
		t.Errorf("%s with selector %q: %v, want InvalidArgument naming label_selector", rpc, sel, err)
	}
}

// eventVersion is the resume point after ev, or "" for an event without
// one.
func eventVersion(ev *pbresource.WatchEvent) string {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return e.Upsert.Resource.Version
	case *pbresource.WatchEvent_Delete_:
		if e.Delete.Version != "" {
			return e.Delete.Version
		}
		return e.Delete.Resource.Version
	case *pbresource.WatchEvent_EndOfSnapshot_:
		return e.EndOfSnapshot.Version
	case *pbresource.WatchEvent_Bookmark_:
		return e.Bookmark.Version
	}
	return ""
}

func versionNumber(v string) uint64 {
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// watcher reads a WatchList stream into a Validator. When the server ends
// the stream because it could not keep up (Aborted), it resumes from the
// validator's position, as a client does.
type watcher struct {
	t      *testing.T
	ctx    context.Context
	c      pbresource.ResourceServiceClient
	req    *pbresource.WatchListRequest
	stream grpc.ServerStreamingClient[pbresource.WatchEvent]
	v      *Validator
}

func watch(t *testing.T, ctx context.Context, c pbresource.ResourceServiceClient, sel, since string, batch bool, v *Validator) *watcher {
	t.Helper()
	w := &watcher{t: t, ctx: ctx, c: c, v: v,
		req: &pbresource.WatchListRequest{Type: barType, Tenancy: anyTen, LabelSelector: sel, SinceVersion: since, BatchEvents: batch, Bookmarks: true}}
	w.open()
	return w
}

func (w *watcher) open() {
	w.t.Helper()
	stream, err := w.c.WatchList(w.ctx, w.req)
	if err != nil {
		w.t.Fatal(err)
	}
	w.stream = stream
}

// recv returns the stream's next message, resuming an Aborted stream.
func (w *watcher) recv() *pbresource.WatchEvent {
	w.t.Helper()
	for {
		ev, err := w.stream.Recv()
		if err == nil {
			return ev
		}
		if status.Code(err) != codes.Aborted {
			w.t.Fatalf("Recv: %v", err)
		}
		w.t.Logf("resuming after %v", err)
		if w.v.inSnap {
			*w.v = *NewValidator(w.v.sel.String(), nil, "")
		} else {
			*w.v = *NewValidator(w.v.sel.String(), w.v.View, w.v.Position)
		}
		w.req.SinceVersion = w.v.Position
		w.open()
	}
}

// until applies events until done holds, failing on the first problem.
func (w *watcher) until(done func() bool) {
	w.t.Helper()
	for !done() {
		ev := w.recv()
		evs := []*pbresource.WatchEvent{ev}
		if b := ev.GetBatch(); b != nil {
			evs = b.Events
		}
		for _, ev := range evs {
			if err := w.v.Apply(ev); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// Validator checks the events of one WatchList stream with a selector and
// keeps the view they add up to:
//
//   - a snapshot (at the start of a stream that does not resume, or after
//     NewSnapshot) holds only matching Upserts, each name once;
//   - after it, event versions strictly increase (bookmarks do not go
//     back);
//   - every Upsert matches the selector; an Upsert of a held resource
//     keeps its Uid and raises its Version;
//   - a Delete carries a held resource's Uid and a Version at least the
//     held one; one carrying a resource that does not match is a leave,
//     whose Version is above the held one. On a resumed stream (before any
//     NewSnapshot) a Delete of a resource not held is allowed: the server
//     cannot know what matched before the resume.
//
// Compare then checks the view against a List with the selector.
type Validator struct {
	sel      selector.Selector
	View     map[string]*pbresource.Resource
	inSnap   bool
	resumed  bool
	last     uint64
	Position string // the latest resume point seen
}

// NewValidator returns a validator of a stream of sel that starts with a
// snapshot, or, resuming, from view (which it takes over).
func NewValidator(sel string, view map[string]*pbresource.Resource, resumePoint string) *Validator {
	v := &Validator{sel: selector.MustParse(sel), View: view, Position: resumePoint, last: versionNumber(resumePoint)}
	if view == nil {
		v.View, v.inSnap = map[string]*pbresource.Resource{}, true
	} else {
		v.resumed = true
	}
	return v
}

// Apply checks ev and applies it to the view.
func (v *Validator) Apply(ev *pbresource.WatchEvent) error {
	if ev.GetNewSnapshot() != nil {
		v.View, v.inSnap, v.resumed, v.last = map[string]*pbresource.Resource{}, true, false, 0
		return nil
	}
	if ev.GetEndOfSnapshot() != nil {
		if !v.inSnap {
			return fmt.Errorf("EndOfSnapshot outside a snapshot")
		}
		v.inSnap = false
	}
	ver := eventVersion(ev)
	if n := versionNumber(ver); ver != "" && !v.inSnap {
		if b := ev.GetBookmark() != nil || ev.GetEndOfSnapshot() != nil; (b && n < v.last) || (!b && n <= v.last) {
			return fmt.Errorf("%s at version %s after version %d", describe(ev), ver, v.last)
		}
		v.last, v.Position = max(v.last, n), ver
	}
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		r := e.Upsert.Resource
		if !v.sel.Matches(r.Metadata) {
			return fmt.Errorf("%s does not match %q: %v", describe(ev), v.sel, r.Metadata)
		}
		held, ok := v.View[r.Id.Name]
		if ok && v.inSnap {
			return fmt.Errorf("%s twice in the snapshot", describe(ev))
		}
		if ok && (held.Id.Uid != r.Id.Uid || versionNumber(r.Version) <= versionNumber(held.Version)) {
			return fmt.Errorf("%s over held uid %s version %s", describe(ev), held.Id.Uid, held.Version)
		}
		v.View[r.Id.Name] = r
	case *pbresource.WatchEvent_Delete_:
		r := e.Delete.Resource
		if v.inSnap {
			return fmt.Errorf("%s in the snapshot", describe(ev))
		}
		held, ok := v.View[r.Id.Name]
		switch {
		case !ok && !v.resumed:
			return fmt.Errorf("%s of a resource the watch does not hold", describe(ev))
		case ok && held.Id.Uid != r.Id.Uid:
			return fmt.Errorf("%s with uid %s, held uid %s", describe(ev), r.Id.Uid, held.Id.Uid)
		case ok && v.sel.Matches(r.Metadata) && r.Version != held.Version:
			return fmt.Errorf("%s of a matching resource, held at version %s", describe(ev), held.Version)
		case ok && !v.sel.Matches(r.Metadata) && versionNumber(r.Version) <= versionNumber(held.Version):
			return fmt.Errorf("%s leaves the selection, but held at version %s", describe(ev), held.Version)
		}
		delete(v.View, r.Id.Name)
	}
	return nil
}

// Compare returns an error unless the view holds exactly listed, at the
// same versions.
func (v *Validator) Compare(listed []*pbresource.Resource) error {
	want := make(map[string]string, len(listed))
	for _, r := range listed {
		want[r.Id.Name] = r.Id.Uid + "@" + r.Version
	}
	got := make(map[string]string, len(v.View))
	for n, r := range v.View {
		got[n] = r.Id.Uid + "@" + r.Version
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("the watch's view %v differs from the List %v", got, want)
	}
	return nil
}

func describe(ev *pbresource.WatchEvent) string {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return "Upsert " + e.Upsert.Resource.Id.Name + "@" + e.Upsert.Resource.Version
	case *pbresource.WatchEvent_Delete_:
		return "Delete " + e.Delete.Resource.Id.Name + "@" + e.Delete.Resource.Version
	}
	return fmt.Sprintf("%T", ev.Event)
}

func testWatchEnterLeave(t *testing.T, c pbresource.ResourceServiceClient) {
	ctx := testContext(t)
	in := write(t, ctx, c, newBar("in", map[string]string{"team": "a"}))
	write(t, ctx, c, newBar("out", map[string]string{"team": "b"}))
	w := watch(t, ctx, c, "team=a", "", false, NewValidator("team=a", nil, ""))
	w.until(func() bool { return !w.v.inSnap })
	if err := w.v.Compare([]*pbresource.Resource{in}); err != nil {
		t.Fatal(err)
	}
	// Leave: a Delete carrying the resource as now stored, at its version.
	in.Metadata = map[string]string{"team": "b"}
	left := write(t, ctx, c, in)
	ev := recvOne(t, w)
	if d := ev.GetDelete(); d == nil || d.Resource.Version != left.Version || d.Version != left.Version || d.Resource.Metadata["team"] != "b" {
		t.Fatalf("after leaving: %v, want a Delete of version %s", ev, left.Version)
	}
	// Enter again: an Upsert.
	left.Metadata = map[string]string{"team": "a"}
	back := write(t, ctx, c, left)
	ev = recvOne(t, w)
	if u := ev.GetUpsert(); u == nil || u.Resource.Version != back.Version {
		t.Fatalf("after entering: %v, want an Upsert of version %s", ev, back.Version)
	}
	// Changes outside the selection send nothing; a sentinel shows it.
	out := write(t, ctx, c, newBar("out2", map[string]string{"team": "b"}))
	out.Metadata = map[string]string{"team": "c"}
	write(t, ctx, c, out)
	if _, err := c.Delete(ctx, &pbresource.DeleteRequest{Id: out.Id}); err != nil {
		t.Fatal(err)
	}
	sentinel := write(t, ctx, c, newBar("sentinel", map[string]string{"team": "a"}))
	ev = recvOne(t, w)
	if u := ev.GetUpsert(); u == nil || u.Resource.Id.Name != "sentinel" || u.Resource.Version != sentinel.Version {
		t.Fatalf("got %v, want the sentinel's Upsert", ev)
	}
}

// recvOne returns the stream's next change (skipping bookmarks), checked
// by the validator.
func recvOne(t *testing.T, w *watcher) *pbresource.WatchEvent {
	t.Helper()
	for {
		ev := w.recv()
		if err := w.v.Apply(ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetBookmark() == nil {
			return ev
		}
	}
}

// writers starts n writers that flip the team label of resources w0..w19
// between a, b and c, delete and re-create them, until stop is closed.
func writers(t *testing.T, ctx context.Context, c pbresource.ResourceServiceClient, n int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 24))
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%02d", rnd.IntN(20))
				team := string(rune('a' + rnd.IntN(3)))
				var err error
				if rnd.IntN(6) == 0 {
					_, err = c.Delete(ctx, &pbresource.DeleteRequest{Id: &pbresource.ID{Type: barType, Tenancy: anyTen, Name: name}})
				} else {
					_, err = c.Write(ctx, &pbresource.WriteRequest{Resource: newBar(name, map[string]string{"team": team})})
					if status.Code(err) == codes.AlreadyExists || status.Code(err) == codes.Aborted {
						err = update(ctx, c, name, team)
					}
				}
				if err != nil && status.Code(err) != codes.NotFound && status.Code(err) != codes.Aborted && status.Code(err) != codes.AlreadyExists {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	return &wg
}

// update sets the team label of a stored resource (versioned).
func update(ctx context.Context, c pbresource.ResourceServiceClient, name, team string) error {
	rsp, err := c.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: barType, Tenancy: anyTen, Name: name}})
	if err != nil {
		return err
	}
	res := rsp.Resource
	res.Metadata = map[string]string{"team": team}
	_, err = c.Write(ctx, &pbresource.WriteRequest{Resource: res})
	return err
}

// settle writes a new sentinel that matches team=a, applies events until
// its Upsert arrives, then checks the view against a List.
func settle(t *testing.T, ctx context.Context, c pbresource.ResourceServiceClient, w *watcher, round int) {
	t.Helper()
	s := write(t, ctx, c, newBar(fmt.Sprintf("sentinel-%d", round), map[string]string{"team": "a"}))
	w.until(func() bool {
		held, ok := w.v.View[s.Id.Name]
		return ok && held.Version == s.Version
	})
	rsp, err := c.List(ctx, &pbresource.ListRequest{Type: barType, Tenancy: anyTen, LabelSelector: "team=a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.v.Compare(rsp.Resources); err != nil {
		t.Fatal(err)
	}
}

func testWatchRacingWriters(t *testing.T, c pbresource.ResourceServiceClient) {
	ctx := testContext(t)
	for round, batch := range []bool{false, true} {
		stop := make(chan struct{})
		wg := writers(t, ctx, c, 3, stop)
		w := watch(t, ctx, c, "team=a", "", batch, NewValidator("team=a", nil, ""))
		n := 0
		w.until(func() bool { n++; return !w.v.inSnap && n > 100 })
		close(stop)
		wg.Wait()
		settle(t, ctx, c, w, round)
	}
}

func testWatchResumeRacingWriters(t *testing.T, c pbresource.ResourceServiceClient) {
	ctx := testContext(t)
	stop := make(chan struct{})
	wg := writers(t, ctx, c, 3, stop)
	defer func() { close(stop); wg.Wait() }()
	v := NewValidator("team=a", nil, "")
	for round := range 6 {
		wctx, cancel := context.WithCancel(ctx)
		w := watch(t, wctx, c, "team=a", v.Position, round%2 == 1, v)
		n := 0
		w.until(func() bool { n++; return !v.inSnap && n > 30 })
		cancel()
		// Away: the writers move resources in and out of the selection.
		held := slices.Collect(maps.Keys(v.View))
		for _, name := range held[:min(3, len(held))] {
			// A writer may delete it, or delete it and create it again
			// (FailedPrecondition: another Uid), between the read and the
			// write.
			if err := update(ctx, c, name, "b"); err != nil && status.Code(err) != codes.NotFound && status.Code(err) != codes.Aborted &&
				status.Code(err) != codes.FailedPrecondition {
				t.Fatal(err)
			}
		}
		v = NewValidator("team=a", v.View, v.Position)
	}
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	wg = &sync.WaitGroup{}
	w := watch(t, ctx, c, "team=a", v.Position, false, v)
	settle(t, ctx, c, w, 0)
}
