package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
)

// TestSlowSubscriberResynced: a browser that does not read its live
// stream is dropped, told to reload, once subscriberBuffer changes wait
// for it; it is never buffered beyond that.
func TestSlowSubscriberResynced(t *testing.T) {
	w := &sharedWatch{res: map[string]*pbresource.Resource{}, subs: map[*subscriber]struct{}{}}
	slow := newSubscriber(filter{}, "", "", subscriberBuffer+1)
	w.subscribe(slow)
	for i := range subscriberBuffer + 1 {
		id := &pbresource.ID{Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), Tenancy: &pbresource.Tenancy{}}
		w.apply(rowKey(id), &pbresource.Resource{Id: id})
	}
	require.Empty(t, w.subs, "the slow stream is still subscribed")
	n := 0
	for range slow.ch {
		n++
	}
	require.Equal(t, subscriberBuffer, n, "changes buffered for the slow stream")
	require.ErrorIs(t, slow.err, errResync)
}

// TestOpenEndedPageTakesItsRoom: an open-ended page (its last) is sent the
// new rows it has room for, then told to reload, so that a burst of
// creates is not streamed whole to every open page; a page with an end is
// sent only the changes within it, and changes to rows it holds pass.
func TestOpenEndedPageTakesItsRoom(t *testing.T) {
	w := &sharedWatch{res: map[string]*pbresource.Resource{}, subs: map[*subscriber]struct{}{}}
	write := func(name string) {
		id := &pbresource.ID{Name: name, Tenancy: &pbresource.Tenancy{}}
		w.apply(rowKey(id), &pbresource.Resource{Id: id})
	}
	write("a")
	open := newSubscriber(filter{}, "", "", 2)
	closed := newSubscriber(filter{}, "", rowKey(&pbresource.ID{Name: "b", Tenancy: &pbresource.Tenancy{}}), 0)
	w.subscribe(open)
	w.subscribe(closed)
	write("a") // a change to a row the pages hold
	write("b")
	write("c")
	require.Contains(t, w.subs, open, "two new rows fit")
	write("d")
	require.NotContains(t, w.subs, open, "the third new row makes the page reload")
	require.ErrorIs(t, open.err, errResync)
	require.Len(t, open.ch, 3)
	require.Contains(t, w.subs, closed)
	require.Len(t, closed.ch, 2, "a and b: the others are past its end")
}
