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
	slow := newSubscriber(filter{}, "", "")
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
