package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/internal/retry"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LeaseOption configures a Lease in NewLease.
type LeaseOption func(*Lease)

// WithLeaseValue sets the value stored under this member's election key,
// for operators to see who leads (etcdctl get --prefix <election key>).
// The default is "<hostname>/<pid>".
func WithLeaseValue(value string) LeaseOption {
	return func(l *Lease) { l.value = value }
}

// WithStepDownMargin sets how long before the earliest moment etcd could
// expire the session this member gives up leadership when it cannot renew
// the session (default: a fifth of the TTL). It is the time singleton
// controllers have to stop, plus slack for a local clock that runs slow.
// It is kept below a third of the TTL.
func WithStepDownMargin(d time.Duration) LeaseOption {
	return func(l *Lease) { l.margin = d }
}

// WithLeaseLogger sets the logger for elections, step-downs and retries.
// The default discards.
func WithLeaseLogger(logger hclog.Logger) LeaseOption {
	return func(l *Lease) { l.logger = logger }
}

// Lease is a leader lease on an etcd election: it implements the controller
// Manager's Lease (pass it with controller.WithLease), so singleton
// controllers run on the one Manager that holds it.
//
// NewLease starts campaigning at once, in the background, and goes on
// until its context is cancelled: it takes an etcd lease with the given
// TTL, runs an election (go.etcd.io/etcd/client/v3/concurrency) under the
// election key, and while elected keeps renewing the lease. When anything
// goes wrong (the lease cannot be renewed, etcd says it expired, the leader
// key is deleted, the session ends), Held turns false and Changed fires,
// and the Lease campaigns again with a new etcd lease.
//
// # What it guarantees
//
// Held is true only while this member's leader key exists and this member
// can be sure etcd has not expired its lease. The Lease records the local
// time just before sending each renewal; etcd renews the lease when it
// receives the request, so it cannot expire it earlier than send time plus
// TTL. Held turns false at send time plus TTL minus the step-down margin
// (see WithStepDownMargin) unless a later renewal succeeded, whether or not
// the goroutine that renews got to run: Held compares the clock itself.
// Another member can only be elected after this member's key is gone, that
// is after its lease expired (or it resigned), so two members never both
// see Held true at the same instant, as long as:
//
//   - the local clock does not run slower than etcd's by more than the
//     margin over one TTL (monotonic clocks; wall-clock jumps do not
//     matter);
//   - nobody deletes the leader key or revokes the lease by hand (the
//     Lease notices through a watch, but only after the fact);
//   - the caller acts on Held promptly: a process paused (GC, swap, a
//     stopped VM) between checking Held and writing can still write after
//     losing the lease.
//
// The last point is why singleton controllers should also fence their
// writes: Fence returns the leader key and its create revision, and a
// Backend write made under WithFence with that token is refused once the
// key is gone, in the same etcd transaction as the write.
//
// On a voluntary exit (the context is cancelled) the Lease resigns and
// revokes its etcd lease, so another member is elected at once: cancel it
// only after the Manager has stopped its singleton controllers. After an
// involuntary loss the old etcd lease is left to expire instead, which
// gives the stopping controllers the margin and more before anyone else
// can be elected.
type Lease struct {
	client   *clientv3.Client
	election string
	ttl      time.Duration
	margin   time.Duration
	value    string
	logger   hclog.Logger

	mu       sync.Mutex
	held     bool
	deadline time.Time // Held is false from here on unless a renewal moves it
	changed  chan struct{}
	fenceKey string
	fenceRev int64

	done chan struct{}
}

// NewLease starts campaigning for leadership under electionKey (a key
// prefix shared by every member, e.g. "/loom/leader") with etcd sessions of
// the given TTL, rounded up to whole seconds (at least 1 s; etcd may raise
// very small TTLs to its own minimum, which only makes holding safer). The
// campaign runs until ctx is cancelled; Done is closed once it has stopped
// and, if it was leader, resigned.
func NewLease(ctx context.Context, client *clientv3.Client, electionKey string, ttl time.Duration, opts ...LeaseOption) (*Lease, error) {
	if electionKey == "" {
		return nil, errors.New("etcd: NewLease needs an election key")
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("etcd: lease TTL %s is below etcd's resolution of 1 s", ttl)
	}
	host, _ := os.Hostname()
	l := &Lease{
		client:   client,
		election: electionKey,
		ttl:      time.Duration(math.Ceil(ttl.Seconds())) * time.Second,
		value:    fmt.Sprintf("%s/%d", host, os.Getpid()),
		logger:   hclog.NewNullLogger(),
		changed:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.margin = l.ttl / 5
	for _, opt := range opts {
		opt(l)
	}
	l.margin = min(max(l.margin, 0), l.ttl/3)
	go l.run(ctx)
	return l, nil
}

// Held reports whether this member is the leader now.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held && time.Now().Before(l.deadline)
}

// Changed returns a channel closed the next time Held changes.
func (l *Lease) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Fence returns the current term's fencing token: the leader key and the
// revision that created it, with ok false when the lease is not held. Pass
// them to WithFence to make writes that cannot land after this term ends.
func (l *Lease) Fence() (key string, rev int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held || !time.Now().Before(l.deadline) {
		return "", 0, false
	}
	return l.fenceKey, l.fenceRev, true
}

// Done is closed when the campaign has stopped after its context was
// cancelled.
func (l *Lease) Done() <-chan struct{} { return l.done }

func (l *Lease) setHeld(held bool, key string, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fenceKey, l.fenceRev = key, rev
	if l.held == held {
		return
	}
	l.held = held
	close(l.changed)
	l.changed = make(chan struct{})
}

// extend moves the deadline after a successful renewal.
func (l *Lease) extend(deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if deadline.After(l.deadline) {
		l.deadline = deadline
	}
}

func (l *Lease) run(ctx context.Context) {
	defer close(l.done)
	// Campaign for as long as ctx lives; jitter keeps the servers that lost
	// the lease together from campaigning in step.
	bo := retry.NewBackOff(100*time.Millisecond, l.ttl, backoff.WithRandomizationFactor(backoff.DefaultRandomizationFactor))
	for {
		elected, err := l.term(ctx)
		l.setHeld(false, "", 0)
		if ctx.Err() != nil {
			return
		}
		if elected {
			bo.Reset()
		}
		delay := bo.NextBackOff()
		l.logger.Warn("leader election: campaigning again", "election", l.election, "after", delay, "error", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
	}
}

// errLost* say why a term ended.
var (
	errLeaseExpired = errors.New("the etcd lease expired")
	errKeyDeleted   = errors.New("the leader key was deleted")
	errSessionEnded = errors.New("the etcd session ended")
)

// term takes an etcd lease, campaigns with it, and holds leadership until
// something ends it. It reports whether it was elected.
func (l *Lease) term(ctx context.Context) (elected bool, err error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()

	sent := time.Now()
	grant, err := l.client.Grant(tctx, int64(l.ttl/time.Second))
	if err != nil {
		return false, fmt.Errorf("granting an etcd lease: %w", err)
	}
	id := grant.ID
	defer func() {
		if ctx.Err() != nil {
			// Let another member take over at once.
			rctx, rcancel := context.WithTimeout(context.Background(), l.ttl)
			_, _ = l.client.Revoke(rctx, id)
			rcancel()
		}
	}()
	l.mu.Lock()
	l.deadline = sent.Add(time.Duration(grant.TTL)*time.Second - l.margin)
	l.mu.Unlock()

	lost := make(chan error, 1)
	go l.keepAlive(tctx, id, lost)

	session, err := concurrency.NewSession(l.client, concurrency.WithLease(id), concurrency.WithContext(tctx))
	if err != nil {
		return false, fmt.Errorf("starting an etcd session: %w", err)
	}
	election := concurrency.NewElection(session, l.election)
	campaign := make(chan error, 1)
	go func() { campaign <- election.Campaign(tctx, l.value) }()
	select {
	case err := <-campaign:
		if err != nil {
			return false, fmt.Errorf("campaigning: %w", err)
		}
	case err := <-lost:
		return false, err
	case <-ctx.Done():
		return false, ctx.Err()
	}

	// Campaign returns once every older key is gone; make sure ours is
	// still there, from this lease (it expires with the lease).
	key, rev := election.Key(), election.Rev()
	resp, err := l.client.Get(tctx, key)
	if err != nil {
		return false, fmt.Errorf("checking the leader key: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev || clientv3.LeaseID(resp.Kvs[0].Lease) != id {
		return false, errKeyDeleted
	}
	select {
	case err := <-lost:
		return false, err
	default:
	}
	l.setHeld(true, key, rev)
	l.logger.Info("leader election: elected", "election", l.election, "key", key, "revision", rev)
	defer func() {
		l.setHeld(false, "", 0)
		if ctx.Err() != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), l.ttl)
			_ = election.Resign(rctx)
			rcancel()
		}
		l.logger.Warn("leader election: leadership ended", "election", l.election, "key", key, "reason", err)
	}()

	keyGone := make(chan error, 1)
	go l.watchKey(tctx, key, rev, resp.Header.Revision+1, keyGone)
	select {
	case err := <-lost:
		return true, err
	case err := <-keyGone:
		return true, err
	case <-session.Done():
		return true, errSessionEnded
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// watchKey reports on gone when the leader key (created at revision rev)
// is deleted, watching it from revision from until ctx ends. It runs on
// its own goroutine because starting an etcd watch blocks while etcd is
// unreachable, and the term must still notice a lost lease meanwhile.
func (l *Lease) watchKey(ctx context.Context, key string, rev, from int64, gone chan<- error) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range l.client.Watch(wctx, key, clientv3.WithRev(from)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					cancel()
					gone <- errKeyDeleted
					return
				}
				from = ev.Kv.ModRevision + 1
			}
		}
		cancel()
		// Interrupted (no leader, compaction, connection trouble): look
		// at the key, and watch again from there.
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := l.client.Get(ctx, key)
		if err != nil {
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev {
			gone <- errKeyDeleted
			return
		}
		from = resp.Header.Revision + 1
	}
}

// keepAlive renews lease id every third of the TTL until ctx ends, moving
// the deadline to the send time of each successful renewal plus the TTL
// etcd granted, minus the margin. It reports on lost when the deadline
// passes without a successful renewal or etcd says the lease is gone.
func (l *Lease) keepAlive(ctx context.Context, id clientv3.LeaseID, lost chan<- error) {
	interval := l.ttl / 3
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	timer := time.NewTimer(min(interval, time.Until(deadline)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		if !sent.Before(deadline) {
			lost <- errLeaseExpired
			return
		}
		// A renewal still unanswered at the deadline is no use.
		kctx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := l.client.KeepAliveOnce(kctx, id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && resp.TTL > 0:
			deadline = sent.Add(time.Duration(resp.TTL)*time.Second - l.margin)
			l.extend(deadline)
			timer.Reset(min(interval, time.Until(deadline)))
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			lost <- errLeaseExpired
			return
		default:
			// Try again soon, but never past the deadline.
			l.logger.Debug("leader election: lease renewal failed", "error", err)
			timer.Reset(max(0, min(interval/4, time.Until(deadline))))
		}
	}
}
