package selector_test

import (
	"strings"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/selector"
)

func res(name, version, team string) *pbresource.Resource {
	return &pbresource.Resource{
		Id:       &pbresource.ID{Name: name, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}},
		Version:  version,
		Metadata: map[string]string{"team": team},
	}
}

func upsert(r *pbresource.Resource) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: r}}}
}

func del(r *pbresource.Resource, version string) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{Delete: &pbresource.WatchEvent_Delete{Resource: r, Version: version}}}
}

var (
	endOfSnapshot = &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: "1"}}}
	newSnapshot   = &pbresource.WatchEvent{Event: &pbresource.WatchEvent_NewSnapshot_{NewSnapshot: &pbresource.WatchEvent_NewSnapshot{}}}
)

// run applies evs and describes what the filter delivers, one event per
// element: "U name@version", "D name@version/event version", "-" for
// nothing, or the control event's kind.
func run(f *selector.WatchFilter, evs ...*pbresource.WatchEvent) string {
	var out []string
	for _, ev := range evs {
		got, ok := f.Apply(ev)
		switch {
		case !ok:
			out = append(out, "-")
		case got.GetUpsert() != nil:
			r := got.GetUpsert().Resource
			out = append(out, "U "+r.Id.Name+"@"+r.Version)
		case got.GetDelete() != nil:
			r := got.GetDelete().Resource
			out = append(out, "D "+r.Id.Name+"@"+r.Version+"/"+got.GetDelete().Version)
		default:
			out = append(out, "ctl")
		}
	}
	return strings.Join(out, ", ")
}

func TestWatchFilterEnterLeave(t *testing.T) {
	f := selector.NewWatchFilter(selector.MustParse("team=a"), false)
	got := run(f,
		upsert(res("x", "1", "a")), upsert(res("y", "1", "b")), endOfSnapshot,
		upsert(res("x", "2", "b")), // leaves: Delete of the stored resource
		upsert(res("x", "3", "c")), // still out: nothing
		upsert(res("y", "4", "a")), // enters
		del(res("y", "4", "a"), "5"),
		del(res("x", "3", "c"), "6"), // never held: nothing
	)
	want := "U x@1, -, ctl, D x@2/2, -, U y@4, D y@4/5, -"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestWatchFilterResumed(t *testing.T) {
	f := selector.NewWatchFilter(selector.MustParse("team=a"), true)
	got := run(f,
		upsert(res("x", "7", "b")), // may have been held: a Delete, once
		upsert(res("x", "8", "b")),
		upsert(res("x", "9", "a")),
		upsert(res("x", "10", "b")),
		del(res("z", "3", "a"), "11"), // may have been held
		del(res("x", "10", "b"), "12"),
		upsert(res("x", "13", "b")), // deleted, so forgotten: a Delete again
		upsert(res("x", "14", "b")),
		newSnapshot, // the snapshot defines what is held from here
		upsert(res("w", "13", "b")),
		endOfSnapshot,
		upsert(res("w", "14", "c")),
	)
	want := "D x@7/7, -, U x@9, D x@10/10, D z@3/11, -, D x@13/13, -, ctl, -, ctl, -"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestWatchFilterTwice checks that filtering a filtered stream again (a
// client behind a Loom server) changes nothing a client holds.
func TestWatchFilterTwice(t *testing.T) {
	server := selector.NewWatchFilter(selector.MustParse("team=a"), false)
	client := selector.NewWatchFilter(selector.MustParse("team=a"), false)
	var got []string
	for _, ev := range []*pbresource.WatchEvent{
		upsert(res("x", "1", "a")), endOfSnapshot, upsert(res("x", "2", "b")), upsert(res("x", "3", "a")),
	} {
		if out, ok := server.Apply(ev); ok {
			got = append(got, run(client, out))
		}
	}
	if want := "U x@1, ctl, D x@2/2, U x@3"; strings.Join(got, ", ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}
