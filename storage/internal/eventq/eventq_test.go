package eventq

import (
	"context"
	"errors"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

func newIntQueue(limit int, snapshot []*pbresource.Resource) *Queue[int] {
	return New(limit, snapshot, func(*pbresource.Resource) int { return -1 }, 0, nil)
}

// A consumer whose context has ended gets the context's error at once, also
// while events are buffered for it: a server told to stop must not first
// hand out (and send) a backlog of up to the buffer's limit.
func TestNextHonoursContextWithBufferedItems(t *testing.T) {
	q := newIntQueue(100, []*pbresource.Resource{{}, {}})
	for i := 1; i <= 10; i++ {
		if !q.Push(i) {
			t.Fatalf("Push(%d) ended the watch", i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if it, err := q.Next(ctx); err != nil || it != -1 {
		t.Fatalf("first Next = %d, %v; want the snapshot item", it, err)
	}
	cancel()
	for range 3 {
		if it, err := q.Next(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after cancel = %d, %v; want context.Canceled", it, err)
		}
	}

	// The items stay: another context takes them, in order.
	want := []int{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, w := range want {
		it, err := q.Next(context.Background())
		if err != nil || it != w {
			t.Fatalf("Next = %d, %v; want %d", it, err, w)
		}
	}
}

// An ended watch reports why, whatever its context.
func TestNextAfterEndReportsWhy(t *testing.T) {
	q := newIntQueue(1, nil)
	q.Push(1)
	if q.Push(2) {
		t.Fatal("Push over the limit kept the watch running")
	}
	if _, err := q.Next(context.Background()); !errors.Is(err, storage.ErrWatchTooSlow) {
		t.Fatalf("Next after overflow = %v, want ErrWatchTooSlow", err)
	}
	q.Close()
	if _, err := q.Next(context.Background()); !errors.Is(err, storage.ErrWatchClosed) {
		t.Fatalf("Next after Close = %v, want ErrWatchClosed", err)
	}
}

// BenchmarkNext is the consumer's cost per buffered item, with a context
// that can end (as a WatchList's can).
func BenchmarkNext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const burst = 1024
	q := newIntQueue(burst, nil)
	if _, err := q.Next(ctx); err != nil { // EndOfSnapshot
		b.Fatal(err)
	}
	items := make([]int, burst)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%burst == 0 {
			q.Push(items...)
		}
		if _, err := q.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
