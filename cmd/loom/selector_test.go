package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/selector"
)

// TestListSelectorAgainstConsul checks that list -l shows the same
// resources from a server that ignores label_selector as from Loom's.
func TestListSelectorAgainstConsul(t *testing.T) {
	for _, consul := range []bool{false, true} {
		opts := []resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes)}
		if consul {
			opts = append(opts, resourcetest.ConsulLike(0))
		}
		svc := resourcetest.StartService(t, opts...)
		owner := svc.Resource(foo.ZipType, "owner").WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, svc.Client)
		for i, team := range []string{"a", "b", "a", "c"} {
			svc.Resource(foo.BarV1Type, "bar"+string(rune('0'+i))).WithData(t, &pbfoov1.Bar{Baz: "b"}).WithMeta("team", team).WithOwner(owner.Id).Write(t, svc.Client)
		}
		q := listQuery{typ: foo.BarV1Type, tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, labels: "team=a", sel: selector.MustParse("team=a")}
		for _, byOwner := range []bool{false, true} {
			if byOwner {
				q.owner = owner.Id
			}
			list, err := q.run(context.Background(), svc.Client)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range list {
				names = append(names, r.Id.Name)
			}
			slices.Sort(names)
			if want := []string{"bar0", "bar2"}; !slices.Equal(names, want) {
				t.Errorf("consul %v, by owner %v: listed %v, want %v", consul, byOwner, names, want)
			}
		}
	}
}

// TestWatchSelectorAgainstConsul checks that watch -l filters a stream a
// server did not filter: a resource that leaves the selection is printed
// as a delete, one that enters as an upsert, others not at all.
func TestWatchSelectorAgainstConsul(t *testing.T) {
	bar := func(name, version, team string) *pbresource.WatchEvent {
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: &pbresource.Resource{
			Id:      &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name},
			Version: version, Metadata: map[string]string{"team": team}}}}}
	}
	f := &fakeWatcher{streams: []fakeStream{{
		events: []*pbresource.WatchEvent{
			bar("x", "1", "a"), bar("y", "2", "b"), endOfSnapshot(),
			bar("x", "3", "b"), bar("y", "4", "a"), bar("z", "5", "c"),
		},
		end: status.Error(codes.PermissionDenied, "the end"),
	}}}
	var stdout, stderr bytes.Buffer
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("none")}
	w := &eventWriter{p: &printer{format: formatTable, types: types, stdout: &stdout, stderr: &stderr, now: time.Now, warned: map[string]bool{}},
		filter: selector.NewWatchFilter(selector.MustParse("team=a"), false)}
	err := watchLoop(context.Background(), f, &pbresource.WatchListRequest{LabelSelector: "team=a"}, w, &stderr, retry.NewBackOff(time.Millisecond, time.Millisecond), nil)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n")[1:] {
		fields := strings.Fields(line)
		got = append(got, fields[0]+" "+fields[1]+" "+fields[4])
	}
	if want := []string{"UPSERT x 1", "DELETE x 3", "UPSERT y 4"}; !slices.Equal(got, want) {
		t.Errorf("printed %q, want %q\n%s", got, want, stdout.String())
	}
	if w.resume != "5" {
		t.Errorf("resume point %q, want 5: past the change the filter left out", w.resume)
	}
}

// TestCLISelector runs list -l and watch -l against a Loom server.
func TestCLISelector(t *testing.T) {
	addr := startWidgetServer(t)
	c := newCLI(t, addr)
	doc := func(name, team string) string {
		return "id: {type: clitest.v1.Widget, name: " + name + "}\nmetadata: {team: " + team + "}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, color: red}\n"
	}
	c.ok("apply", "-f", writeFile(t, "w.yaml", doc("a", "x")+"---\n"+doc("b", "y")+"---\n"+doc("c", "x")))
	if out := c.ok("list", "clitest.v1.Widget", "-l", "team=x", "-o", "name"); out != "clitest.v1.Widget/default.default/a\nclitest.v1.Widget/default.default/c\n" {
		t.Errorf("list -l team=x printed %q", out)
	}
	if out := c.ok("list", "clitest.v1.Widget", "-l", "team notin (x)", "-page-size", "1", "-o", "name"); out != "clitest.v1.Widget/default.default/b\n" {
		t.Errorf("list -l 'team notin (x)' printed %q", out)
	}
	if _, errOut, code := c.run("list", "clitest.v1.Widget", "-l", "finalizers"); code != 2 || !strings.Contains(errOut, `-l: label selector: at position 0: "finalizers" is a reserved metadata key`) {
		t.Errorf("list -l finalizers: exit %d, stderr %q; want 2 and the reserved key named", code, errOut)
	}
	out, errOut, code := c.run("watch", "clitest.v1.Widget", "-l", "team=y", "-o", "table", "-timeout", "1s")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "UPSERT  b ") {
		t.Errorf("watch -l team=y: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
