package inmem

// WatchStats is a count of a Backend's watches at one moment, for metrics.
type WatchStats struct {
	// Open is how many watches read the event log: neither closed nor
	// ended for falling behind.
	Open int
	// Buffered is how many changes, summed over the open watches, the
	// event log holds that a watch has not read yet (changes of other
	// types included, snapshots not counted). Watches share the log, so
	// this is not memory.
	Buffered int
	// Dropped is how many watches have been ended with
	// storage.ErrWatchTooSlow since New.
	Dropped uint64
}

// WatchStats counts the watches now. It takes the lock of the list of
// watches only: it is meant for a metrics scrape, and writes pay nothing
// for it.
func (b *Backend) WatchStats() WatchStats {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	s := WatchStats{Open: len(b.watches), Dropped: b.dropped.Load()}
	for w := range b.watches {
		s.Buffered += w.buffered()
	}
	return s
}
