package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
)

// BenchmarkListPages lists 10,000 Bars from the in-memory backend with the
// server's List (no client, no copies): in one response, in pages of 500,
// and in pages of 500 while 1,000 writes land after the first page (so the
// later pages rebuild the listing's version from the event log).
func BenchmarkListPages(b *testing.B) {
	const n = 10000
	env := newEnv(b)
	for i := range n {
		env.write(b, bar(b, fmt.Sprintf("bar-%05d", i), "x"))
	}
	ctx := testCtx(b)
	listAll := func(b *testing.B, size uint32, between func()) {
		req := barList(size, "")
		countPages(b, n, between, func(token string) (int, string) {
			req.PageToken = token
			rsp, err := env.server.List(ctx, req)
			require.NoError(b, err)
			return len(rsp.Resources), rsp.NextPageToken
		})
	}
	b.Run("one-list", func(b *testing.B) {
		for b.Loop() {
			listAll(b, 0, nil)
		}
	})
	b.Run("pages-500", func(b *testing.B) {
		for b.Loop() {
			listAll(b, 500, nil)
		}
	})
	b.Run("pages-500-after-1000-writes", func(b *testing.B) {
		round := 0
		for b.Loop() {
			round++
			listAll(b, 500, func() {
				b.StopTimer()
				for i := range 1000 {
					env.write(b, bar(b, fmt.Sprintf("bar-%05d", i*10), fmt.Sprint(round)))
				}
				b.StartTimer()
			})
		}
	})
}

// BenchmarkListByOwnerPages lists the 10,000 Bars one Zip owns from the
// in-memory backend with the server's ListByOwner (no client, no copies):
// in one response, in pages of 1,000 (the reaper's), and in pages of 1,000
// while 1,000 writes to the children land after the first page.
func BenchmarkListByOwnerPages(b *testing.B) {
	const n = 10000
	env := newEnv(b)
	owner := env.write(b, zip(b, "owner"))
	children := make([]*pbresource.Resource, n)
	for i := range n {
		c := bar(b, fmt.Sprintf("bar-%05d", i), "x")
		c.Owner = owner.Id
		children[i] = env.write(b, c)
	}
	ctx := testCtx(b)
	listAll := func(b *testing.B, size uint32, between func()) {
		req := &pbresource.ListByOwnerRequest{Owner: owner.Id, PageSize: size}
		countPages(b, n, between, func(token string) (int, string) {
			req.PageToken = token
			rsp, err := env.server.ListByOwner(ctx, req)
			require.NoError(b, err)
			return len(rsp.Resources), rsp.NextPageToken
		})
	}
	b.Run("one-list", func(b *testing.B) {
		for b.Loop() {
			listAll(b, 0, nil)
		}
	})
	b.Run("pages-1000", func(b *testing.B) {
		for b.Loop() {
			listAll(b, 1000, nil)
		}
	})
	b.Run("pages-1000-after-1000-writes", func(b *testing.B) {
		round := 0
		for b.Loop() {
			round++
			listAll(b, 1000, func() {
				b.StopTimer()
				for i := range 1000 {
					c := bar(b, fmt.Sprintf("bar-%05d", i*10), fmt.Sprint(round))
					c.Owner = owner.Id
					env.write(b, c)
				}
				b.StartTimer()
			})
		}
	})
}

// countPages pages with page(token), which returns a page's size and next
// token, from the empty token on, running between (if set) once after the
// first page, and checks that the pages held n resources.
func countPages(b *testing.B, n int, between func(), page func(token string) (int, string)) {
	got, token := 0, ""
	for {
		size, next := page(token)
		got += size
		if next == "" {
			break
		}
		if between != nil {
			between()
			between = nil
		}
		token = next
	}
	require.Equal(b, n, got)
}
