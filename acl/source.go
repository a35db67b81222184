package acl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/resource"
)

// Source is an ACL file and the Policy last loaded from it. Resolve serves
// as server.Config.ACLResolver; Run reloads the file when it changes or
// the process gets SIGHUP. A file that fails to load leaves the previous
// policy in force (and is logged), so a bad edit never opens the server.
type Source struct {
	path   string
	logger hclog.Logger

	policy atomic.Pointer[Policy]

	mu       sync.Mutex // serialises reloads; guards sum and onReload
	sum      [sha256.Size]byte
	onReload func()
}

// NewSource loads the ACL file at path. It fails when the file cannot be
// read or parsed: a host must not start with ACLs it cannot apply. A nil
// logger discards reload messages.
func NewSource(path string, logger hclog.Logger) (*Source, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Source{path: path, logger: logger}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Policy returns the policy in force.
func (s *Source) Policy() *Policy { return s.policy.Load() }

// Reload reads the file again and, when it parses, puts it in force. It
// reports whether the content changed; on an error the previous policy
// stays.
func (s *Source) Reload() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(s.path)
	if err != nil {
		return false, fmt.Errorf("reading the ACL file: %w", err)
	}
	sum := sha256.Sum256(data)
	if s.policy.Load() != nil && bytes.Equal(sum[:], s.sum[:]) {
		return false, nil
	}
	p, err := Parse(s.path, data)
	if err != nil {
		return false, err
	}
	s.policy.Store(p)
	s.sum = sum
	if s.onReload != nil {
		s.onReload()
	}
	return true, nil
}

// OnReload sets fn to be called after each reload that puts new rules in
// force (not after one that fails or finds the file unchanged), before
// Reload returns: e.g. server.Server.ReauthorizeWatches, which ends the
// open watches the new rules no longer allow. Reloads wait for it, so fn
// must not call Reload.
func (s *Source) OnReload(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReload = fn
}

// Run reloads the file whenever the process gets SIGHUP and when its
// content changes (checked every interval; 0 means every 5 seconds), until
// ctx ends.
func (s *Source) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
		}
		changed, err := s.Reload()
		switch {
		case err != nil:
			s.logger.Error("ACL file not reloaded; the previous rules stay in force", "error", err)
		case changed:
			s.logger.Info("ACL file reloaded", "path", s.path, "tokens", s.Policy().Len())
		}
	}
}

// Resolve returns the Authorizer of the token in ctx's incoming gRPC
// metadata (resource.TokenMetadataKey). No token, or one the policy does not name,
// is Unauthenticated.
func (s *Source) Resolve(ctx context.Context) (resource.Authorizer, error) {
	tokens := metadata.ValueFromIncomingContext(ctx, resource.TokenMetadataKey)
	if len(tokens) == 0 || tokens[0] == "" {
		return nil, status.Errorf(codes.Unauthenticated, "ACLs are on: send a token in the %s metadata", resource.TokenMetadataKey)
	}
	a, ok := s.Policy().Token(tokens[0])
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "ACL token not found")
	}
	return a, nil
}
