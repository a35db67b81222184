package inmem

// WatchStats is a count of a Backend's watches at one moment, for metrics.
type WatchStats struct {
	// Open is how many watches are in the fan-out: neither closed nor
	// ended for falling behind.
	Open int
	// Buffered is how many changes the open watches hold that their
	// consumers have not taken yet (snapshots not counted).
	Buffered int
	// Dropped is how many watches have been ended with
	// storage.ErrWatchTooSlow since New.
	Dropped uint64
}

// WatchStats counts the watches now. It holds the store lock shared only
// while it copies the list of watches, then takes each watch's queue locks
// in turn: it is meant for a metrics scrape, and writes pay nothing for it
// but an atomic add when a watch is dropped.
func (b *Backend) WatchStats() WatchStats {
	b.mu.RLock()
	b.watchMu.Lock()
	var ws []*watch
	for _, l := range b.watches {
		ws = append(ws, l...)
	}
	b.watchMu.Unlock()
	b.mu.RUnlock()

	s := WatchStats{Open: len(ws), Dropped: b.dropped.Load()}
	for _, w := range ws {
		s.Buffered += w.buf.Buffered()
	}
	return s
}
