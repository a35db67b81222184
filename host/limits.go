package host

import (
	"flag"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// minKeepaliveTime is the shortest -keepalive-time gRPC applies: it raises
// shorter ones to a second.
const minKeepaliveTime = time.Second

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
	return nil
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
