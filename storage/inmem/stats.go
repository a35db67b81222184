package inmem

import "github.com/loomrt/loom/storage"

// WatchStats counts the watches now. It takes the lock of the list of
// watches only: it is meant for a metrics scrape, and writes pay nothing
// for it.
func (b *Backend) WatchStats() storage.WatchStats {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	s := storage.WatchStats{Open: len(b.watches), Dropped: b.dropped.Load()}
	for w := range b.watches {
		s.Buffered += w.buffered()
	}
	return s
}
