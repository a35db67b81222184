package server

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

func barList(size uint32, token string) *pbresource.ListRequest {
	return &pbresource.ListRequest{
		Type:      foo.BarV1Type,
		Tenancy:   &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		PageSize:  size,
		PageToken: token,
	}
}

// listPages pages through req's listing, checking that every page has the
// same version and at most page_size resources, and that every page but the
// last is full. It returns the resources' names and the version.
func listPages(t *testing.T, client pbresource.ResourceServiceClient, req *pbresource.ListRequest) ([]string, string) {
	t.Helper()
	return walkPages(t, int(req.PageSize), func(token string) ([]*pbresource.Resource, string, string) {
		req.PageToken = token
		rsp, err := client.List(testCtx(t), req)
		require.NoError(t, err)
		return rsp.Resources, rsp.Version, rsp.NextPageToken
	}, func(id *pbresource.ID) string { return id.Name })
}

// walkPages pages with page(token), which returns a page's resources,
// version and next token, from the empty token on, checking that every
// page has the same version and that every page but the last holds size
// resources. It returns the resources' names (as name gives them) and the
// version.
func walkPages(t *testing.T, size int, page func(token string) ([]*pbresource.Resource, string, string), name func(*pbresource.ID) string) ([]string, string) {
	t.Helper()
	var names []string
	var version, token string
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "paging does not end")
		resources, v, next := page(token)
		if version == "" {
			version = v
		}
		require.NotEmpty(t, v)
		require.Equal(t, version, v, "every page has the listing's version")
		for _, r := range resources {
			names = append(names, name(r.Id))
		}
		if next == "" {
			return names, version
		}
		require.Len(t, resources, size, "a page before the last is full")
		token = next
	}
}

// TestListPages: pages hold what one List holds, after the GroupVersion and
// ACL filters, full up to page_size; an unpaged List reports its version.
func TestListPages(t *testing.T) {
	env := newEnv(t, withACL(func(context.Context) (resource.Authorizer, error) { return readFilter, nil }))
	for i := range 23 {
		env.write(t, bar(t, fmt.Sprintf("b%02d", i), "x"))
		if i%3 == 0 {
			env.write(t, bar(t, fmt.Sprintf("secret-%02d", i), "x"))
			env.write(t, barV2(t, fmt.Sprintf("c%02d", i), "x"))
		}
	}
	whole, err := env.client.List(testCtx(t), barList(0, ""))
	require.NoError(t, err)
	require.Len(t, whole.Resources, 23)
	require.Empty(t, whole.NextPageToken)
	latest := env.write(t, zip(t, "later"))
	require.Equal(t, strconv.Itoa(mustAtoi(t, latest.Version)-1), whole.Version, "an unpaged List reports the store's version")

	var want []string
	for _, r := range whole.Resources {
		want = append(want, r.Id.Name)
	}
	for _, size := range []uint32{1, 4, 23, 24, MaxListPageSize} {
		got, version := listPages(t, env.client, barList(size, ""))
		require.Equal(t, want, got, "page size %d", size)
		require.Equal(t, latest.Version, version)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// TestListPages_BadRequests: page sizes above the maximum and tokens that
// are malformed or were issued for another query are InvalidArgument,
// naming the field.
func TestListPages_BadRequests(t *testing.T) {
	env := newEnv(t)
	for i := range 5 {
		env.write(t, bar(t, fmt.Sprintf("b%d", i), "x"))
	}
	_, err := env.client.List(testCtx(t), barList(MaxListPageSize+1, ""))
	requireCode(t, err, codes.InvalidArgument, "page_size")

	first, err := env.client.List(testCtx(t), barList(2, ""))
	require.NoError(t, err)
	tok := first.NextPageToken
	require.NotEmpty(t, tok)

	for name, bad := range map[string]string{
		"not base64": "!!!",
		"truncated":  tok[:len(tok)-3],
		"extended":   tok + "AAAA",
		"empty data": "AQ",
		"too long":   string(make([]byte, 4096)),
	} {
		_, err := env.client.List(testCtx(t), barList(2, bad))
		requireCode(t, err, codes.InvalidArgument, "page_token")
		_ = name
	}
	other := barList(2, tok)
	other.NamePrefix = "b"
	_, err = env.client.List(testCtx(t), other)
	requireCode(t, err, codes.InvalidArgument, "page_token", "another")
	other = barList(2, tok)
	other.Type = foo.BarV2Type
	_, err = env.client.List(testCtx(t), other)
	requireCode(t, err, codes.InvalidArgument, "page_token", "another")

	// The same query with another page size continues the listing.
	rest, err := env.client.List(testCtx(t), barList(0, tok))
	require.NoError(t, err)
	require.Len(t, rest.Resources, 3)
	require.Empty(t, rest.NextPageToken)
}

// TestListPages_TooOld: a token whose version has left the event log is
// Aborted, telling the client to list again.
func TestListPages_TooOld(t *testing.T) {
	env := newEnv(t, withWatchBuffer(16))
	for i := range 5 {
		env.write(t, bar(t, fmt.Sprintf("b%d", i), "x"))
	}
	first, err := env.client.List(testCtx(t), barList(2, ""))
	require.NoError(t, err)
	for i := range 40 {
		env.write(t, bar(t, "b0", strconv.Itoa(i)))
	}
	_, err = env.client.List(testCtx(t), barList(2, first.NextPageToken))
	requireCode(t, err, codes.Aborted, "list again")
}

// TestListThenWatch: a paged List under racing writers, then a WatchList
// from the listing's version, sees every later change exactly once: the
// listing plus the changes is the store at the end (Kubernetes'
// list-then-watch).
func TestListThenWatch(t *testing.T) {
	env := newEnv(t)
	for i := range 30 {
		env.write(t, bar(t, fmt.Sprintf("b%02d", i), "x"))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("b%02d", (i*7)%40)
			var err error
			if i%4 == 3 {
				_, err = env.client.Delete(context.Background(), &pbresource.DeleteRequest{Id: barID(name)})
			} else {
				_, err = env.client.Write(context.Background(), &pbresource.WriteRequest{Resource: bar(t, name, strconv.Itoa(i))})
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()

	state := make(map[string]string) // name -> version
	req := barList(4, "")
	var version string
	for {
		rsp, err := env.client.List(testCtx(t), req)
		require.NoError(t, err)
		version = rsp.Version
		for _, r := range rsp.Resources {
			state[r.Id.Name] = r.Version
		}
		if rsp.NextPageToken == "" {
			break
		}
		req.PageToken = rsp.NextPageToken
	}
	w := startWatch(t, env.client, barWatch(version, false))
	close(stop)
	wg.Wait()
	marker := writeBar(t, env.client, "zz-marker")

	last := mustAtoi(t, version)
	for {
		ev := recvEvent(t, w)
		var v int
		switch {
		case ev.GetUpsert() != nil:
			r := ev.GetUpsert().Resource
			v = mustAtoi(t, r.Version)
			state[r.Id.Name] = r.Version
		case ev.GetDelete() != nil:
			v = mustAtoi(t, ev.GetDelete().Version)
			delete(state, ev.GetDelete().Resource.Id.Name)
		default:
			t.Fatalf("a resumed watch sends changes only, got %v", ev)
		}
		require.Greater(t, v, last, "changes come once, in order, after the listing's version")
		last = v
		if ev.GetUpsert().GetResource().GetId().GetName() == marker.Id.Name {
			break
		}
	}
	final, err := env.client.List(testCtx(t), barList(0, ""))
	require.NoError(t, err)
	want := make(map[string]string)
	for _, r := range final.Resources {
		want[r.Id.Name] = r.Version
	}
	require.Equal(t, want, state, "the listing plus the watched changes is the store")
}
