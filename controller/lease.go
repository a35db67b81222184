package controller

import "sync"

// Placement says where a controller runs.
type Placement int

const (
	// PlacementSingleton runs the controller only while this Manager holds
	// the leader lease: one copy in the whole cluster. The default.
	PlacementSingleton Placement = iota
	// PlacementEachServer runs the controller on every Manager, leader or
	// not. Such controllers should not write resources others also write.
	PlacementEachServer
)

// String names the placement.
func (p Placement) String() string {
	if p == PlacementEachServer {
		return "each-server"
	}
	return "singleton"
}

// Lease tells a Manager whether it is the leader, i.e. may run singleton
// controllers.
type Lease interface {
	// Held reports whether the lease is held now.
	Held() bool
	// Changed returns a channel closed the next time Held may have
	// changed. Call it again after each close for the next change.
	Changed() <-chan struct{}
}

// flagLease is a Lease the host sets by hand (Manager.SetLeader).
type flagLease struct {
	mu      sync.Mutex
	held    bool
	changed chan struct{}
}

func newFlagLease() *flagLease { return &flagLease{changed: make(chan struct{})} }

func (l *flagLease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

func (l *flagLease) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *flagLease) set(held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == held {
		return
	}
	l.held = held
	close(l.changed)
	l.changed = make(chan struct{})
}
