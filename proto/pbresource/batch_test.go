package pbresource_test

import (
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
)

// fakeStream hands out msgs, then io.EOF.
type fakeStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	msgs []*pbresource.WatchEvent
}

func (f *fakeStream) Recv() (*pbresource.WatchEvent, error) {
	if len(f.msgs) == 0 {
		return nil, io.EOF
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

func bookmark(v string) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Bookmark_{Bookmark: &pbresource.WatchEvent_Bookmark{Version: v}}}
}

func batch(evs ...*pbresource.WatchEvent) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Batch_{Batch: &pbresource.WatchEvent_Batch{Events: evs}}}
}

// Unbatched hands out single events as they come and the events of a
// batch one by one, in order, skipping empty batches, and leaves the
// batches it received unchanged.
func TestUnbatched(t *testing.T) {
	b := batch(bookmark("2"), bookmark("3"))
	s := pbresource.Unbatched(&fakeStream{msgs: []*pbresource.WatchEvent{bookmark("1"), b, batch(), bookmark("4")}})
	var got []string
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.GetBookmark().GetVersion())
	}
	if want := []string{"1", "2", "3", "4"}; len(got) != len(want) || got[0] != "1" || got[1] != "2" || got[2] != "3" || got[3] != "4" {
		t.Fatalf("got %v, want %v", got, want)
	}
	if !proto.Equal(b, batch(bookmark("2"), bookmark("3"))) {
		t.Fatalf("the batch received was changed: %v", b)
	}

	// RecvMsg fills the message it is given with the next event.
	s = pbresource.Unbatched(&fakeStream{msgs: []*pbresource.WatchEvent{batch(bookmark("5"), bookmark("6"))}})
	for _, want := range []string{"5", "6"} {
		var ev pbresource.WatchEvent
		if err := s.RecvMsg(&ev); err != nil || ev.GetBookmark().GetVersion() != want {
			t.Fatalf("RecvMsg: %v, %v; want bookmark %s", &ev, err, want)
		}
	}
}

// A batch inside a batch, which no server sends, ends the stream with
// Internal.
func TestUnbatchedRefusesNestedBatches(t *testing.T) {
	s := pbresource.Unbatched(&fakeStream{msgs: []*pbresource.WatchEvent{batch(bookmark("1"), batch(bookmark("2")))}})
	if ev, err := s.Recv(); err != nil || ev.GetBookmark().GetVersion() != "1" {
		t.Fatalf("first Recv: %v, %v", ev, err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("Recv of a nested batch: %v, want Internal", err)
	}
}
