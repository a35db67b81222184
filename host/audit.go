package host

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/resource"
)

const (
	// auditWindow is how often, at most, the audit log has a line for
	// the same token, method and code while they keep being refused.
	auditWindow = 10 * time.Second
	// auditMaxKeys is how many (token, method, code) the audit log tells
	// apart within a window; the refusals of any more are counted together
	// under the token "(others)".
	auditMaxKeys = 256
)

// auditor logs, at info level, the requests the ACLs refused: the method,
// the code, the caller's address and the token's name (never its secret),
// through an auditLog, so that a client refused again and again cannot
// flood the log. It counts every refusal in a metric.
type auditor struct {
	acls   *acl.Source
	log    *auditLog
	denied *prometheus.CounterVec
}

// newAuditor returns the auditor of acls, registering its metric on reg.
// Close it once the server has stopped, to log the refusals not logged
// yet.
func newAuditor(acls *acl.Source, logger hclog.Logger, reg prometheus.Registerer) auditor {
	denied := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loom_requests_denied_total",
		Help: "Requests the ACLs refused (PermissionDenied or Unauthenticated), by method and code.",
	}, []string{"method", "code"})
	reg.MustRegister(denied)
	return auditor{acls: acls, log: newAuditLog(logger, auditWindow, auditMaxKeys), denied: denied}
}

func (a auditor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rsp, err := handler(ctx, req)
	a.check(ctx, info.FullMethod, err)
	return rsp, err
}

func (a auditor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	a.check(ss.Context(), info.FullMethod, err)
	return err
}

func (a auditor) check(ctx context.Context, method string, err error) {
	code := status.Code(err)
	if code != codes.PermissionDenied && code != codes.Unauthenticated {
		return
	}
	// The method is one the server serves (gRPC answers others before the
	// interceptors): the label's values are bounded.
	a.denied.WithLabelValues(method, code.String()).Inc()
	token := "(none)"
	if secrets := metadata.ValueFromIncomingContext(ctx, resource.TokenMetadataKey); len(secrets) > 0 && secrets[0] != "" {
		token = "(unknown)"
		if authz, ok := a.acls.Policy().Token(secrets[0]); ok {
			token = authz.Name()
		}
	}
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	a.log.refused(auditKey{token: token, method: method, code: code}, from)
}

// Close logs the refusals not logged yet; later ones are logged each on
// its own line.
func (a auditor) Close() { a.log.Close() }

// auditKey is what the audit log tells refusals apart by.
type auditKey struct {
	token, method string
	code          codes.Code
}

// auditLog writes the audit lines: the first refusal of a key at once,
// then, while the key keeps being refused, one line per window counting
// the refusals since the key's previous line. A key refused nothing for a
// whole window is forgotten (its next refusal has a line at once again).
// It tells at most maxKeys keys apart; the refusals of others are counted
// under the token "(others)", so that the lines per window stay bounded
// however many tokens a client invents.
type auditLog struct {
	logger  hclog.Logger
	window  time.Duration
	maxKeys int

	mu      sync.Mutex
	entries map[auditKey]*auditEntry
	timer   *time.Timer // runs while entries has any
	closed  bool
}

// auditEntry is a key's refusals since its last line.
type auditEntry struct {
	count    uint64
	lastPeer string
}

func newAuditLog(logger hclog.Logger, window time.Duration, maxKeys int) *auditLog {
	return &auditLog{logger: logger, window: window, maxKeys: maxKeys, entries: map[auditKey]*auditEntry{}}
}

// refused records a refusal of key from the address peer.
func (l *auditLog) refused(key auditKey, peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.entries[key]; !ok && len(l.entries) >= l.maxKeys {
		key = auditKey{token: "(others)", method: "(any)", code: key.code}
	}
	if e, ok := l.entries[key]; ok {
		e.count++
		e.lastPeer = peer
		return
	}
	l.logger.Info("request denied", "method", key.method, "code", key.code.String(), "token", key.token, "peer", peer)
	if l.closed {
		return
	}
	l.entries[key] = &auditEntry{}
	if l.timer == nil {
		l.timer = time.AfterFunc(l.window, l.flush)
	}
}

// flush writes a line for every key refused since its last line, forgets
// the keys refused nothing, and runs again a window later while any is
// left.
func (l *auditLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	if len(l.entries) > 0 && !l.closed {
		l.timer.Reset(l.window)
	} else {
		l.timer = nil
	}
}

func (l *auditLog) flushLocked() {
	for key, e := range l.entries {
		if e.count == 0 {
			delete(l.entries, key)
			continue
		}
		l.logger.Info("more requests denied", "count", e.count, "window", l.window,
			"method", key.method, "code", key.code.String(), "token", key.token, "last_peer", e.lastPeer)
		e.count = 0
	}
}

// Close logs the refusals not logged yet and stops aggregating.
func (l *auditLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.flushLocked()
	clear(l.entries)
}
