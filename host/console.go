package host

import (
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loomrt/loom/console"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/internal/daemon"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/catalog"
	"github.com/loomrt/loom/server/history"
)

// consoleFlags are the web console's flags.
type consoleFlags struct {
	on         bool
	stuckAfter time.Duration
	maxWatches int
}

func (c *consoleFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.on, "ui", false, "serve the read-only web console under /ui/ on -http-addr (default with -dev: on; -ui=false turns it off); with -acl-file it asks for a token and shows what the token may read")
	fs.DurationVar(&c.stuckAfter, "ui-stuck-after", console.DefaultStuckAfter,
		"how long a resource's status may lag its generation, or its deletion wait on finalizers, before the console's Stuck page lists it")
	fs.IntVar(&c.maxWatches, "ui-max-watches", console.DefaultMaxWatches,
		"most watches the console holds: one per type being viewed (per ACL token); a page that needs another is refused until one is let go")
}

// check completes the flags once parsed: -dev turns the console on unless
// -ui says otherwise.
func (c *consoleFlags) check(fs *flag.FlagSet, f *config) error {
	if f.dev && !isSet(fs, "ui") {
		c.on = true
	}
	if c.on && f.httpAddr == "" {
		if isSet(fs, "ui") {
			return usagef("-ui needs -http-addr")
		}
		c.on = false
	}
	if c.stuckAfter <= 0 || c.maxWatches <= 0 {
		return usagef("-ui-stuck-after and -ui-max-watches must be positive")
	}
	return nil
}

// lastErrors keeps the last error each controller logged: a sink of the
// host's logger.
type lastErrors struct {
	mu sync.Mutex
	m  map[string]lastError // by controller name; bounded by the controllers
}

type lastError struct {
	msg string
	at  time.Time
}

// Accept records an error line with a "controller" field.
func (l *lastErrors) Accept(_ string, level hclog.Level, msg string, args ...any) {
	if level < hclog.Error {
		return
	}
	var name string
	var cause any
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "controller":
			name, _ = args[i+1].(string)
		case "error":
			cause = args[i+1]
		}
	}
	if name == "" {
		return
	}
	if cause != nil {
		msg = fmt.Sprintf("%s: %v", msg, cause)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]lastError{}
	}
	l.m[name] = lastError{msg: msg, at: time.Now()}
}

func (l *lastErrors) of(name string) lastError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[name]
}

// consoleControllers describes the host's controllers for the console.
type consoleControllers struct {
	run     *controller.Manager // runs here
	remote  *controller.Manager // registered for processes of their own (-controllers=false); nil otherwise
	lease   leaderLease         // nil: always leading
	metrics prometheus.Gatherer
	errors  *lastErrors
}

func (cc consoleControllers) list() []console.Controller {
	totals := cc.totals()
	state := "leading"
	if cc.lease != nil && !cc.lease.Held() {
		state = "following"
	}
	primed := cc.run.Primed()
	var out []console.Controller
	add := func(m *controller.Manager, state string, primed bool) {
		for _, c := range m.Controllers() {
			d := c.Describe()
			v := console.Controller{Name: d.Name, ManagedType: d.ManagedType, State: state, Primed: primed}
			for _, w := range d.Watches {
				v.Watches = append(v.Watches, w.Type)
			}
			t := totals[d.Name]
			v.QueueDepth, v.Reconciles, v.Errors = int(t.depth), t.reconciles, t.errors
			last := cc.errors.of(d.Name)
			v.LastError, v.LastErrorAt = last.msg, last.at
			out = append(out, v)
		}
	}
	add(cc.run, state, primed)
	if cc.remote != nil {
		add(cc.remote, "elsewhere", false)
	}
	return out
}

type controllerTotals struct{ reconciles, errors, depth float64 }

// totals reads the controllers' reconcile and error counts and queue
// depths from the host's metrics.
func (cc consoleControllers) totals() map[string]controllerTotals {
	out := map[string]controllerTotals{}
	families, _ := cc.metrics.Gather()
	for _, f := range families {
		label := "controller"
		switch f.GetName() {
		case "loom_controller_reconcile_total", "loom_controller_reconcile_errors_total":
		case "workqueue_depth":
			label = "name"
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			var name string
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					name = l.GetValue()
				}
			}
			t := out[name]
			switch f.GetName() {
			case "loom_controller_reconcile_total":
				t.reconciles += m.GetCounter().GetValue()
			case "loom_controller_reconcile_errors_total":
				t.errors += m.GetCounter().GetValue()
			default:
				t.depth += m.GetGauge().GetValue()
			}
			out[name] = t
		}
	}
	return out
}

// newConsole returns the web console of svc, or nil when it is off.
func newConsole(f config, svc *server.Server, hist *history.Service, cc consoleControllers, logger hclog.Logger) *console.Console {
	if !f.console.on {
		return nil
	}
	cfg := console.Config{
		Client:      server.NewCallerClient(svc),
		Catalog:     catalog.New(svc),
		Controllers: cc.list,
		Host:        console.HostInfo{Version: daemon.ReadBuildInfo().Version, Backend: f.storage, Started: time.Now()},
		ACLs:        f.aclFile != "",
		TLS:         f.httpTLS,
		StuckAfter:  f.console.stuckAfter,
		MaxWatches:  f.console.maxWatches,
		Logger:      logger,
	}
	if hist != nil {
		cfg.History = hist
	}
	return console.New(cfg)
}
