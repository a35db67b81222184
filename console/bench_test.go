package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
)

// BenchmarkW8Consoles is W8 (BenchmarkW8/inproc in package server: 100
// WatchList streams on one type, 10,000 creates) with 0 or 10 consoles
// open on the type's page. A console reads its page's live stream as a
// browser does (an open-ended window: every change is sent to it), and
// when told to reload, loads its page again and re-opens the stream.
// With fullpage, the type holds 50 resources before the writes, so the
// consoles' first page is full and the writes fall outside it (a page
// viewed under load); without, the page is empty and open-ended, the
// worst case. It reports W8's events/s (delivered to the 100 streams), CPU per event,
// the heap in use at the end, and how often consoles had to reload.
func BenchmarkW8Consoles(b *testing.B) {
	for _, fullPage := range []bool{false, true} {
		for _, consoles := range []int{0, 10} {
			b.Run(fmt.Sprintf("fullpage=%v/consoles=%d", fullPage, consoles), func(b *testing.B) { benchW8Consoles(b, consoles, fullPage) })
		}
	}
}

func benchW8Consoles(b *testing.B, consoles int, fullPage bool) {
	const (
		streams = 100
		writes  = 10_000
	)
	data, err := anypb.New(&pbfoov1.Zip{Zap: "a small payload for a widget"})
	if err != nil {
		b.Fatal(err)
	}
	var elapsed, cpu time.Duration
	var heap uint64
	var reloads atomic.Int64
	for range b.N {
		b.StopTimer()
		e := newEnv(b, nil, false)
		if fullPage {
			for i := range 50 {
				e.writeZip(b, fmt.Sprintf("a-%02d", i))
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var viewers sync.WaitGroup
		for range consoles {
			viewers.Go(func() { viewPage(ctx, e.http.URL, "foo.v1.Zip", &reloads) })
		}
		var ready, wg sync.WaitGroup
		for range streams {
			st, err := e.client.WatchList(ctx, &pbresource.WatchListRequest{Type: foo.ZipType})
			if err != nil {
				b.Fatal(err)
			}
			ready.Add(1)
			wg.Go(func() {
				for ev, err := st.Recv(); err == nil && ev.GetEndOfSnapshot() == nil; ev, err = st.Recv() {
				}
				ready.Done()
				for range writes {
					if _, err := st.Recv(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		ready.Wait()
		for consoles > 0 && e.backend.WatchStats().Open < streams+1 {
			time.Sleep(time.Millisecond) // the consoles' shared watch
		}
		b.StartTimer()
		span := benchutil.Start()
		for i := range writes {
			if _, err := e.client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
				Id:   &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: fmt.Sprintf("w-%05d", i)},
				Data: data,
			}}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		r := span.Stop()
		b.StopTimer()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap += ms.HeapInuse
		cancel()
		viewers.Wait()
		elapsed += r.Wall
		cpu += r.CPU
	}
	events := float64(b.N * streams * writes)
	b.ReportMetric(events/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/events, "cpu-ns/event")
	b.ReportMetric(float64(heap)/float64(b.N)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(reloads.Load())/float64(b.N), "reloads")
}

// viewPage is a browser on a type page until ctx ends: it loads the first
// page, then reads the live stream, loading the page again when told to.
func viewPage(ctx context.Context, base, typ string, reloads *atomic.Int64) {
	const pageSize = 50
	for ctx.Err() == nil {
		var page struct {
			Rows []struct{ Key string } `json:"rows"`
		}
		if err := getJSON(ctx, base+"/ui/api/rows?limit=50&type="+typ, &page); err != nil {
			return
		}
		// The window as app.js asks for it: to the page's last row when it
		// is full, else open-ended with room for the rows it lacks.
		q := url.Values{"type": {typ}, "room": {strconv.Itoa(pageSize - len(page.Rows))}}
		if len(page.Rows) == pageSize {
			q.Set("to", page.Rows[pageSize-1].Key)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ui/api/events?"+q.Encode(), nil)
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		lines := bufio.NewScanner(rsp.Body)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "event: resync") {
				reloads.Add(1)
				break
			}
		}
		rsp.Body.Close()
	}
}

func getJSON(ctx context.Context, u string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	return json.NewDecoder(rsp.Body).Decode(v)
}

func getBody(ctx context.Context, u string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	_, err = io.Copy(io.Discard, rsp.Body)
	return err
}

// BenchmarkTypePageFirstScreen is the first screen of a type page with
// 10,000 resources when no one viewed the type before: the console
// watches the type, takes its snapshot, and answers the first page of
// 50 rows. ms/op is the time to that answer.
func BenchmarkTypePageFirstScreen(b *testing.B) {
	e := newEnv(b, nil, false)
	data, _ := anypb.New(&pbfoov1.Zip{Zap: "a small payload"})
	for i := range 10_000 {
		if _, err := e.client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id:   &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: fmt.Sprintf("r-%05d", i)},
			Data: data,
		}}); err != nil {
			b.Fatal(err)
		}
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		fresh := serveConsole(b, e.server) // a console with no watch yet
		start := time.Now()
		if err := getBody(context.Background(), fresh+"/ui/api/rows?limit=50&type=foo.v1.Zip"); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "ms/first-screen")
}
