package console_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/console"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/catalog"
	"github.com/loomrt/loom/storage/inmem"
)

// env is a server on the in-memory backend with the example types, and
// its console served over HTTP.
type env struct {
	backend *inmem.Backend
	server  *server.Server
	client  pbresource.ResourceServiceClient // in process, trusted
	http    *httptest.Server
}

func newEnv(tb testing.TB, acl func(context.Context) (resource.Authorizer, error), tls bool) *env {
	tb.Helper()
	backend := inmem.New()
	reg := resource.NewRegistry()
	require.NoError(tb, foo.RegisterTypes(reg))
	cfg := server.Config{Backend: backend, Registry: reg}
	if acl != nil {
		cfg.ACLResolver = server.TrustInProcess(acl)
	}
	srv := server.New(cfg)
	c := console.New(console.Config{Client: server.NewCallerClient(srv), Catalog: catalog.New(srv), ACLs: acl != nil, TLS: tls})
	hs := httptest.NewServer(c)
	tb.Cleanup(func() { hs.Close(); c.Close() })
	return &env{backend: backend, server: srv, client: server.NewInProcessClient(srv), http: hs}
}

// serveConsole serves a new console of srv and returns its URL.
func serveConsole(tb testing.TB, srv *server.Server) string {
	tb.Helper()
	c := console.New(console.Config{Client: server.NewCallerClient(srv), Catalog: catalog.New(srv)})
	hs := httptest.NewServer(c)
	tb.Cleanup(func() { hs.Close(); c.Close() })
	return hs.URL
}

func (e *env) writeZip(tb testing.TB, name string) *pbresource.Resource {
	tb.Helper()
	data, err := anypb.New(&pbfoov1.Zip{Zap: name})
	require.NoError(tb, err)
	rsp, err := e.client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id:   &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name},
		Data: data,
	}})
	require.NoError(tb, err)
	return rsp.Resource
}

// sse is an open live stream of a type page.
type sse struct {
	rsp   *http.Response
	lines *bufio.Scanner
}

func (e *env) openEvents(tb testing.TB, typ string) *sse {
	tb.Helper()
	rsp, err := http.Get(e.http.URL + "/ui/api/events?type=" + url.QueryEscape(typ))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, rsp.StatusCode)
	tb.Cleanup(func() { rsp.Body.Close() })
	s := &sse{rsp: rsp, lines: bufio.NewScanner(rsp.Body)}
	s.lines.Buffer(nil, 1<<20)
	require.True(tb, s.lines.Scan())
	require.Equal(tb, ": live", s.lines.Text())
	return s
}

// next returns the next event's name and data.
func (s *sse) next(tb testing.TB) (string, string) {
	tb.Helper()
	var event string
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event != "":
			return event, strings.TrimPrefix(line, "data: ")
		}
	}
	tb.Fatalf("the stream ended: %v", s.lines.Err())
	return "", ""
}

// TestSharedWatch: ten browsers viewing one type cost the server one
// watch, and each of them sees a change as it happens.
func TestSharedWatch(t *testing.T) {
	e := newEnv(t, nil, false)
	var streams []*sse
	for range 10 {
		streams = append(streams, e.openEvents(t, "foo.v1.Zip"))
	}
	require.Equal(t, 1, e.backend.WatchStats().Open, "watches open on the backend for ten viewers of one type")
	z := e.writeZip(t, "z1")
	for _, s := range streams {
		ev, data := s.next(t)
		require.Equal(t, "upsert", ev)
		require.Contains(t, data, `"name":"z1"`)
	}
	_, err := e.client.Delete(context.Background(), &pbresource.DeleteRequest{Id: z.Id})
	require.NoError(t, err)
	for _, s := range streams {
		ev, data := s.next(t)
		require.Equal(t, "delete", ev)
		require.Equal(t, `"default//z1"`, data)
	}
}

// TestRowsPage: a type page is a window of the type's resources, in
// order, filtered by name prefix.
func TestRowsPage(t *testing.T) {
	e := newEnv(t, nil, false)
	for i := range 30 {
		e.writeZip(t, fmt.Sprintf("z%02d", i))
	}
	body := get(t, e.http.URL+"/ui/api/rows?type=foo.v1.Zip&offset=10&limit=5&prefix=z1", http.StatusOK)
	require.Contains(t, body, `"total":10`)
	require.Contains(t, body, `"offset":10`) // past the 10 matches: an empty page
	body = get(t, e.http.URL+"/ui/api/rows?type=foo.v1.Zip&offset=2&limit=3", http.StatusOK)
	require.Contains(t, body, `"total":30`)
	require.Regexp(t, `"name":"z02".*"name":"z03".*"name":"z04"`, body)
	require.NotContains(t, body, `"name":"z05"`)
	get(t, e.http.URL+"/ui/api/rows?type=foo.v1.Zip&selector=%3D%3D", http.StatusBadRequest)
}

func get(t *testing.T, u string, want int) string {
	t.Helper()
	rsp, err := http.Get(u)
	require.NoError(t, err)
	defer rsp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(rsp.Body).WriteTo(&b)
	require.Equal(t, want, rsp.StatusCode, b.String())
	return b.String()
}

// TestSecurityHeaders: every answer carries a strict
// Content-Security-Policy and is not cached.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, nil, false)
	for _, path := range []string{"/ui/", "/ui/static/app.js", "/ui/api/overview"} {
		rsp, err := http.Get(e.http.URL + path)
		require.NoError(t, err)
		rsp.Body.Close()
		require.Equal(t, http.StatusOK, rsp.StatusCode, path)
		require.Contains(t, rsp.Header.Get("Content-Security-Policy"), "default-src 'none'", path)
		require.Contains(t, rsp.Header.Get("Content-Security-Policy"), "script-src 'self'", path)
		require.Equal(t, "nosniff", rsp.Header.Get("X-Content-Type-Options"), path)
	}
}

// TestLogin: with ACLs on, the API asks for a token; a token the server
// refuses is not kept; one it knows is kept in the one cookie, HttpOnly,
// SameSite=Strict and (under TLS) Secure, and the API then answers with
// what that token may read.
func TestLogin(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			e := newEnv(t, func(ctx context.Context) (resource.Authorizer, error) {
				md, _ := metadata.FromIncomingContext(ctx)
				if v := md.Get(resource.TokenMetadataKey); len(v) == 1 && v[0] == "good" {
					return resource.AllowAll, nil
				}
				return nil, status.Error(codes.Unauthenticated, "unknown token")
			}, tls)
			get(t, e.http.URL+"/ui/api/overview", http.StatusUnauthorized)
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			rsp, err := noRedirect.PostForm(e.http.URL+"/ui/login", url.Values{"token": {"bad"}})
			require.NoError(t, err)
			rsp.Body.Close()
			require.Empty(t, rsp.Cookies(), "a refused token is not kept")

			rsp, err = noRedirect.PostForm(e.http.URL+"/ui/login", url.Values{"token": {"good"}})
			require.NoError(t, err)
			rsp.Body.Close()
			require.Len(t, rsp.Cookies(), 1)
			ck := rsp.Cookies()[0]
			require.True(t, ck.HttpOnly)
			require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
			require.Equal(t, tls, ck.Secure)

			req, _ := http.NewRequest(http.MethodGet, e.http.URL+"/ui/api/overview", nil)
			req.AddCookie(ck)
			rsp, err = http.DefaultClient.Do(req)
			require.NoError(t, err)
			rsp.Body.Close()
			require.Equal(t, http.StatusOK, rsp.StatusCode)

			// A post from another site does not log in.
			req, _ = http.NewRequest(http.MethodPost, e.http.URL+"/ui/login", strings.NewReader("token=good"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			rsp, err = noRedirect.Do(req)
			require.NoError(t, err)
			rsp.Body.Close()
			require.Equal(t, http.StatusForbidden, rsp.StatusCode)
		})
	}
}
