package inmem

import "github.com/loomrt/loom/storage"

// WatchStats counts the watches now. It holds the store lock shared only
// while it copies the list of watches, then takes each watch's queue locks
// in turn: it is meant for a metrics scrape, and writes pay nothing for it
// but an atomic add when a watch is dropped.
func (b *Backend) WatchStats() storage.WatchStats {
	b.mu.RLock()
	b.watchMu.Lock()
	var ws []*watch
	for _, l := range b.watches {
		ws = append(ws, l...)
	}
	b.watchMu.Unlock()
	b.mu.RUnlock()

	s := storage.WatchStats{Open: len(ws), Dropped: b.dropped.Load()}
	for _, w := range ws {
		s.Buffered += w.buf.Buffered()
	}
	return s
}
