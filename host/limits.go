package host

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loomrt/loom/internal/connlimit"
	"github.com/loomrt/loom/internal/daemon"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

const (
	// minKeepaliveTime is the shortest -keepalive-time gRPC applies: it
	// raises shorter ones to a second.
	minKeepaliveTime = time.Second

	// fdReserve and fdReserveShare are the file descriptors -max-conns's
	// default leaves for all but connections (storage's own connections,
	// files, listeners, the runtime): fdReserve and a fdReserveShare-th of
	// the limit.
	fdReserve      = 128
	fdReserveShare = 16
	// fdLimitAssumed is the limit on open files the default assumes where
	// it cannot be read; fdLimitCounted the most of a limit it counts (an
	// unlimited process still has its memory to think of).
	fdLimitAssumed = 4096
	fdLimitCounted = 1 << 20
)

// defaultMaxConns is -max-conns's default for a limit of fds open files
// (0: unknown) with httpConns of them for the HTTP endpoints: what is left
// of the limit after the reserve, or 0 when nothing is.
func defaultMaxConns(fds uint64, httpConns int) int {
	if fds == 0 {
		fds = fdLimitAssumed
	}
	n := int(min(fds, fdLimitCounted))
	return max(n-httpConns-fdReserve-n/fdReserveShare, 0)
}

// httpConns is how many connections the HTTP endpoints may hold: none
// when they are off.
func (f config) httpConns() int {
	if f.httpAddr == "" {
		return 0
	}
	return f.maxHTTPConns
}

// checkLimits checks the connection and message limits of the command line
// and fills in -max-recv-msg-bytes from -max-resource-bytes when only the
// latter was given.
func checkLimits(fs *flag.FlagSet, f *config) error {
	if f.handshakeTimeout <= 0 {
		return usagef("-handshake-timeout must be positive")
	}
	if f.maxStreams == 0 || f.maxStreams > 1<<31-1 {
		return usagef("-max-streams-per-conn must be between 1 and 2147483647")
	}
	if !flagSet(fs, "max-recv-msg-bytes") {
		f.maxRecvMsg = f.maxResource + recvMsgHeadroom
	}
	if f.maxRecvMsg <= f.maxResource {
		return usagef("-max-recv-msg-bytes (%d) must be above -max-resource-bytes (%d), or a resource the server would store could not be written", f.maxRecvMsg, f.maxResource)
	}
	if f.keepaliveMinTime <= 0 {
		return usagef("-keepalive-min-time must be positive")
	}
	if f.keepaliveTime < minKeepaliveTime {
		return usagef("-keepalive-time must be at least %s", minKeepaliveTime)
	}
	if f.maxConnIdle <= 0 {
		return usagef("-max-conn-idle must be positive")
	}
	return checkConns(fs, f)
}

// checkConns checks -max-conns and -max-http-conns, and works out the
// former's default from the latter when only the latter was given.
func checkConns(fs *flag.FlagSet, f *config) error {
	if f.maxHTTPConns < 1 {
		return usagef("-max-http-conns must be positive")
	}
	if !flagSet(fs, "max-conns") {
		fds := fdLimit()
		if f.maxConns = defaultMaxConns(fds, f.httpConns()); f.maxConns < 1 {
			return usagef("the limit on open files (%d) leaves no room for gRPC connections: raise it (ulimit -n) or set -max-conns", fds)
		}
	}
	if f.maxConns < 1 {
		return usagef("-max-conns must be positive")
	}
	return nil
}

// fdShortfall returns the limit on open files when -max-conns and
// -max-http-conns leave less than fdReserve of it for all else, so that
// connections could use up the file descriptors; 0 otherwise.
func fdShortfall(f config) uint64 {
	fds := fdLimit()
	if fds == 0 || uint64(f.maxConns+f.httpConns()+fdReserve) <= fds {
		return 0
	}
	return fds
}

// flagSet reports whether the command line gave the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// limitOptions are the gRPC server options of the connection and message
// limits: handshake timeout, streams per connection, the largest message
// received, and keepalive (pings a client may send, pings the server
// sends, idle connections closed).
func limitOptions(f config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(f.handshakeTimeout),
		grpc.MaxConcurrentStreams(uint32(f.maxStreams)),
		grpc.MaxRecvMsgSize(f.maxRecvMsg),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             f.keepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: f.maxConnIdle,
			Time:              f.keepaliveTime,
			Timeout:           keepaliveTimeout,
		}),
	}
}

// listenGRPC listens on -grpc-addr, holding at most -max-conns
// connections.
func listenGRPC(f config) (*connlimit.Listener, error) {
	lis, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) && f.grpcAddr == DefaultGRPCAddr {
			err = fmt.Errorf("%w (a Consul agent's gRPC port is 8502 too: choose another with -grpc-addr)", err)
		}
		return nil, err
	}
	return connlimit.NewListener(lis, f.maxConns), nil
}

// mustRegisterConnMetrics registers the connection counts of the gRPC
// listener and of the HTTP server (nil when off) on reg.
func mustRegisterConnMetrics(reg prometheus.Registerer, grpcLis *connlimit.Listener, httpSrv *daemon.HTTPServer) {
	c := connlimit.Collector{"grpc": grpcLis}
	if httpSrv != nil {
		c["http"] = httpSrv.Conns()
	}
	reg.MustRegister(c)
}

// logConnLimits logs the connection limits, with a warning when they leave
// too few file descriptors for the rest.
func logConnLimits(f config, logger hclog.Logger) {
	logger.Info("connection limits", "max_conns", f.maxConns, "max_http_conns", f.httpConns())
	if fds := fdShortfall(f); fds != 0 {
		logger.Warn("-max-conns and -max-http-conns leave little of the limit on open files for storage and files: connections may use it all up",
			"fd_limit", fds, "max_conns", f.maxConns, "max_http_conns", f.httpConns(), "reserve_wanted", fdReserve)
	}
}
