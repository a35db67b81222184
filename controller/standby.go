package controller

// LeaderState says what a Manager does about its singleton controllers
// now: it runs them (Leading), or it follows another Manager with a cache
// kept current for a fast take-over (FollowingWarm) or without one
// (FollowingCold, see WithWarmStandby).
type LeaderState int

const (
	// FollowingCold: not the leader, and the types only singleton
	// controllers need are not watched.
	FollowingCold LeaderState = iota
	// FollowingWarm: not the leader, with every type watched and cached,
	// ready to reconcile the moment the lease is won.
	FollowingWarm
	// Leading: the lease is held and singleton controllers run.
	Leading
)

// String renders the state as /readyz and the logs show it.
func (s LeaderState) String() string {
	switch s {
	case Leading:
		return "leading"
	case FollowingWarm:
		return "following (warm)"
	default:
		return "following (cold)"
	}
}

// WithWarmStandby says whether a Manager that is not the leader watches
// and caches the types its singleton controllers need, so that it starts
// reconciling from a current cache the moment it wins the lease. On by
// default. Turn it off for followers short of memory: their watches of
// those types then start when they first win the lease (and prime before
// anything reconciles), and stay open afterwards.
func WithWarmStandby(on bool) ManagerOption {
	return func(m *Manager) error {
		m.cold = !on
		return nil
	}
}

// LeaderState reports whether the Manager leads or follows, and how.
func (m *Manager) LeaderState() LeaderState {
	if m.lease.Held() {
		return Leading
	}
	if m.cold {
		return FollowingCold
	}
	return FollowingWarm
}
