// Package console serves Loom's web console: read-only pages, under /ui/
// on a host's HTTP listener, that show what the server holds and what its
// controllers are (not) doing.
//
//   - Overview: the registered types with their counts, the controllers
//     (state, cache primed, queue depth, reconciles and errors per second,
//     last error) and the host (version, storage, uptime).
//   - A type: its resources in pages, filtered by name prefix, tenancy and
//     label selector, kept live by server-sent events.
//   - A resource: its data, metadata, owner and owned resources, statuses
//     and history.
//   - Stuck: resources whose status lags their generation, that wait on
//     finalizers, or that have a False condition.
//
// The pages and their scripts are embedded in the binary; nothing is
// loaded from elsewhere, and a strict Content-Security-Policy says so to
// the browser.
//
// Every read goes through the server's API on the user's behalf
// (server.NewCallerClient and the catalog and history services, with the
// user's token in the request's metadata), so with ACLs on the console
// shows what the token may read and nothing else. The token is asked for
// once and kept in the one cookie the console sets (HttpOnly,
// SameSite=Strict, Secure under TLS).
//
// Cost: the resources of a type being viewed come from one watch per type
// and token (one per type without ACLs), shared by every browser that
// views it, held while someone views it and for a minute after. A browser
// gets the page it shows, then the changes within that page; one that
// falls behind by more than a bounded buffer is told to reload its page
// rather than buffered without bound.
package console

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/metadata"

	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

const (
	// DefaultStuckAfter is how long a resource's status may lag its
	// generation, or a deletion wait on finalizers, before the Stuck page
	// lists it, unless Config.StuckAfter says otherwise.
	DefaultStuckAfter = 5 * time.Minute
	// DefaultMaxWatches is how many shared watches (types being viewed,
	// per token) the console holds at most unless Config.MaxWatches says
	// otherwise; a page that would need another is refused (503).
	DefaultMaxWatches = 128
	// subscriberBuffer is how many changes a browser's live stream may
	// fall behind before it is told to reload its page.
	subscriberBuffer = 256
	// watchLinger is how long a shared watch is kept after its last
	// viewer left, so a browser moving between pages does not re-list.
	watchLinger = time.Minute
	// pageLimit is the most rows one page request returns.
	pageLimit = 500
	// stuckLimit is the most resources each section of Stuck lists.
	stuckLimit = 500
	// stuckScanLimit is the most resources Stuck reads for one answer.
	stuckScanLimit = 200_000
)

//go:embed static
var static embed.FS

// Catalog is what the console asks about types: server/catalog's Service.
type Catalog interface {
	ListTypes(context.Context, *pbcatalogv1.ListTypesRequest) (*pbcatalogv1.ListTypesResponse, error)
	GetStats(context.Context, *pbcatalogv1.GetStatsRequest) (*pbcatalogv1.GetStatsResponse, error)
}

// History is what the console asks about a resource's past:
// server/history's Service.
type History interface {
	ListRevisions(context.Context, *pbhistoryv1.ListRevisionsRequest) (*pbhistoryv1.ListRevisionsResponse, error)
}

// Controller is what the overview shows of one controller.
type Controller struct {
	Name        string
	ManagedType *pbresource.Type
	Watches     []*pbresource.Type
	// State is where the controller stands (e.g. "leading",
	// "following"), shown as it is.
	State  string
	Primed bool
	// QueueDepth is the keys waiting in its work queue.
	QueueDepth int
	// Reconciles and Errors are totals since the process started; the
	// console shows them per second.
	Reconciles, Errors float64
	LastError          string
	LastErrorAt        time.Time
}

// HostInfo is what the overview shows of the host.
type HostInfo struct {
	Version string
	Backend string
	Started time.Time
}

// Config is what a Console serves from.
type Config struct {
	// Client reads resources on the user's behalf: a client from
	// server.NewCallerClient, which checks each call's token.
	Client  pbresource.ResourceServiceClient
	Catalog Catalog
	// History is nil when the server keeps none.
	History History
	// Controllers returns the controllers to show; nil shows none.
	Controllers func() []Controller
	Host        HostInfo
	// ACLs on: the console asks for a token.
	ACLs bool
	// TLS: the console is served over HTTPS, its cookie is Secure.
	TLS bool
	// StuckAfter is the Stuck page's threshold (DefaultStuckAfter if 0).
	StuckAfter time.Duration
	// MaxWatches bounds the shared watches (DefaultMaxWatches if 0).
	MaxWatches int
	Logger     hclog.Logger
}

// Console is the web console's HTTP handler, for the paths under /ui/.
type Console struct {
	cfg    Config
	mux    *http.ServeMux
	watch  *watches
	rates  rates
	ctx    context.Context
	cancel context.CancelFunc
	closed sync.Once
}

// New returns the console of cfg. Close it to end its watches.
func New(cfg Config) *Console {
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = DefaultStuckAfter
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Controllers == nil {
		cfg.Controllers = func() []Controller { return nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Console{cfg: cfg, ctx: ctx, cancel: cancel}
	c.watch = newWatches(ctx, cfg.Client, cfg.MaxWatches, cfg.Logger)
	c.rates.init()
	c.routes()
	return c
}

// Close ends the console's watches and live streams.
func (c *Console) Close() { c.closed.Do(c.cancel) }

func (c *Console) routes() {
	files, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(files)))
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, files, "index.html")
	})
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.logout)
	mux.HandleFunc("GET /ui/api/session", c.api(c.session))
	mux.HandleFunc("GET /ui/api/overview", c.api(c.overview))
	mux.HandleFunc("GET /ui/api/rows", c.api(c.rows))
	mux.HandleFunc("GET /ui/api/resource", c.api(c.resource))
	mux.HandleFunc("GET /ui/api/stuck", c.api(c.stuck))
	mux.HandleFunc("GET /ui/api/events", c.events)
	c.mux = mux
}

// contentSecurityPolicy lets the page load its own scripts, styles and
// data from its own origin and nothing else: no inline script, no frame.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP serves the console's pages and their API.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// userContext returns ctx carrying the request's token as a gRPC call's
// outgoing metadata (for the ResourceService client) and incoming
// metadata (for the catalog and history services, called directly).
func userContext(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	md := metadata.Pairs(resource.TokenMetadataKey, token)
	return metadata.NewIncomingContext(metadata.NewOutgoingContext(ctx, md), md)
}
