package controller

import (
	"context"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
)

// streamState is what one watch stream of cacheWatcher.watchOnce knows as
// its events arrive: whether it is (still) a resume or a snapshot, the
// snapshot gathered so far, and what the server it talks to is (Loom, which
// versions its snapshots, or Consul, which does not; see confirm).
type streamState struct {
	w        *cacheWatcher
	typ      *pbresource.Type
	resume   *resumePoint // kept up to date with the stream
	progress *cache.Applied
	sink     func(cache.Event)
	primed   func()

	// resuming: the stream may be the changes after resumedFrom, as asked,
	// and its events are applied at once. If it proves to be a snapshot
	// after all, what it upserted before that is in the cache with a
	// version after resumedFrom (see appliedSince).
	resuming    bool
	resumedFrom resumePoint
	// inSnapshot: the events are a snapshot's, gathered in snapshot until
	// its EndOfSnapshot.
	inSnapshot bool
	snapshot   []*pbresource.Resource
	// unannounced: a snapshot that comes without NewSnapshot (the server
	// ignored since_version) may have been applied in part already.
	unannounced bool
	// current: the cache was current at some point of the stream (it got
	// as far as its EndOfSnapshot, or resumed).
	current bool
	// unversioned: the last snapshot came from a server that does not
	// version it (see confirm); floor: changes at or before it were in the
	// List that confirmed it.
	unversioned bool
	floor       uint64
}

func newStreamState(w *cacheWatcher, typ *pbresource.Type, resume *resumePoint, progress *cache.Applied, sink func(cache.Event), primed func()) *streamState {
	resuming := resume.version != ""
	return &streamState{
		w: w, typ: typ, resume: resume, progress: progress, sink: sink, primed: primed,
		resuming: resuming, resumedFrom: *resume, inSnapshot: !resuming, unannounced: resuming,
		unversioned: w.Probe.unversioned(),
	}
}

// apply takes one event of the stream into the cache, and hands what
// changed to the sink.
func (s *streamState) apply(ctx context.Context, ev *pbresource.WatchEvent) error {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_NewSnapshot_:
		// The server cannot resume: a snapshot follows.
		s.resuming, s.inSnapshot, s.unannounced, s.snapshot = false, true, false, nil
	case *pbresource.WatchEvent_Upsert_:
		if res := e.Upsert.GetResource(); res.GetId() != nil {
			return s.upsert(res)
		}
	case *pbresource.WatchEvent_Delete_:
		if res := e.Delete.GetResource(); res.GetId() != nil {
			return s.delete(res, e.Delete.GetVersion())
		}
	case *pbresource.WatchEvent_Bookmark_:
		s.current = true
		s.resume.advance(e.Bookmark.GetVersion())
		markApplied(s.progress, s.resume)
	case *pbresource.WatchEvent_EndOfSnapshot_:
		if s.inSnapshot || s.resuming {
			return s.endSnapshot(ctx, e.EndOfSnapshot.GetVersion())
		}
	}
	return nil
}

// upsert takes in an Upsert of res: into the snapshot being gathered, or,
// as a change, into the cache (a resource that left the selection, or
// changed outside it, is deleted from it).
func (s *streamState) upsert(res *pbresource.Resource) error {
	if s.resuming && !s.resume.precedes(res.Version) {
		// Not a change after the resume point: the server ignored
		// since_version and this is a snapshot.
		s.resuming, s.inSnapshot = false, true
	}
	matches := s.w.Selector.Matches(res.Metadata)
	if s.inSnapshot {
		if matches {
			s.snapshot = append(s.snapshot, res)
		}
		return nil
	}
	s.current = true
	s.resume.advance(res.Version)
	if !matches {
		old, err := s.w.unselect(res, s.unversioned, s.floor)
		if err != nil {
			return err
		}
		markApplied(s.progress, s.resume)
		if old != nil {
			s.sink(cache.Event{Kind: cache.Deleted, Resource: res, Old: old})
		}
		return nil
	}
	old, applied, err := s.w.upsert(res, s.unversioned, s.floor)
	if err != nil {
		return err
	}
	markApplied(s.progress, s.resume)
	if applied {
		s.sink(cache.Event{Kind: cache.Upserted, Resource: res, Old: old})
	}
	return nil
}

// delete takes in a Delete of res at version.
func (s *streamState) delete(res *pbresource.Resource, version string) error {
	if s.inSnapshot {
		// Not expected before EndOfSnapshot; drop it from the snapshot.
		s.snapshot = dropID(s.snapshot, res.Id)
		return nil
	}
	s.current = true
	del := s.w.Cache.Delete
	if s.unversioned {
		del = s.w.Cache.DeleteSame
	}
	old, err := del(res.Id)
	if err != nil {
		return err
	}
	s.resume.advance(version)
	markApplied(s.progress, s.resume)
	if old != nil {
		s.sink(cache.Event{Kind: cache.Deleted, Resource: res, Old: old})
	}
	return nil
}

// endSnapshot swaps the gathered snapshot, which the server says is
// consistent at version, into the cache. A resumed stream has no
// EndOfSnapshot: one that was "resuming" was a snapshot all along.
func (s *streamState) endSnapshot(ctx context.Context, version string) error {
	// A snapshot without a version comes from a server that is not Loom
	// (Consul): it may be stale and keeps only typ's GroupVersion. See
	// confirm.
	s.unversioned = version == ""
	s.w.Probe.learn(!s.unversioned)
	replace := s.w.Cache.Replace
	var err error
	if s.unversioned {
		if s.snapshot, s.floor, err = s.w.confirm(ctx, s.typ, s.snapshot); err != nil {
			return err
		}
		replace = s.w.Cache.ReplaceGroupVersion
	} else if s.unannounced {
		if s.snapshot, err = s.w.appliedSince(s.typ, s.snapshot, s.resumedFrom); err != nil {
			return err
		}
	}
	s.resuming, s.inSnapshot, s.unannounced = false, false, false
	events, err := replace(s.typ, s.snapshot)
	if err != nil {
		return err
	}
	*s.resume = resumePoint{}
	if version != "" {
		s.resume.advance(version)
	} else {
		// A server that does not say what the snapshot is consistent at:
		// resuming from its newest resource may repeat changes the
		// snapshot had, which the cache absorbs, and misses none.
		for _, res := range s.snapshot {
			s.resume.advance(res.Version)
		}
	}
	s.snapshot = nil
	s.current = true
	markApplied(s.progress, s.resume)
	for _, ev := range events {
		ev.Snapshot = true
		s.sink(ev)
	}
	s.primed()
	return nil
}
