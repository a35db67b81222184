package console

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// watches holds the shared watches: one per type and token being viewed.
type watches struct {
	ctx    context.Context
	client pbresource.ResourceServiceClient
	max    int
	logger hclog.Logger

	mu sync.Mutex
	m  map[watchKey]*sharedWatch
}

type watchKey struct {
	typ   string // resource.UnversionedTypeString
	token string
}

func newWatches(ctx context.Context, client pbresource.ResourceServiceClient, max int, logger hclog.Logger) *watches {
	return &watches{ctx: ctx, client: client, max: max, logger: logger, m: make(map[watchKey]*sharedWatch)}
}

var errTooManyWatches = status.Error(codes.ResourceExhausted,
	"the console watches as many types as it may (-ui-max-watches); try again when fewer are viewed")

// acquire returns the shared watch of typ for token, started if needed,
// once it holds the type's snapshot; release it when done.
func (ws *watches) acquire(ctx context.Context, typ *pbresource.Type, token string) (*sharedWatch, error) {
	key := watchKey{typ: resource.UnversionedTypeString(typ), token: token}
	ws.mu.Lock()
	w := ws.m[key]
	if w == nil {
		if len(ws.m) >= ws.max {
			ws.mu.Unlock()
			return nil, errTooManyWatches
		}
		w = newSharedWatch(ws, key, typ)
		ws.m[key] = w
	}
	w.refs++
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	ws.mu.Unlock()

	select {
	case <-w.primed:
	case <-ctx.Done():
		w.release()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := w.failure(); err != nil {
		w.release()
		return nil, err
	}
	return w, nil
}

// release ends one use of w: the last one lets it linger, then stops it.
func (w *sharedWatch) release() {
	ws := w.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.refs--
	if w.refs > 0 {
		return
	}
	if w.failure() != nil {
		ws.remove(w)
		return
	}
	w.idle = time.AfterFunc(watchLinger, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if w.refs == 0 {
			ws.remove(w)
		}
	})
}

// remove stops w; ws.mu is held.
func (ws *watches) remove(w *sharedWatch) {
	if ws.m[w.key] == w {
		delete(ws.m, w.key)
	}
	w.cancel()
}

// sharedWatch is one WatchList of a type, on a token's behalf, and the
// resources it holds: what every browser viewing the type reads its pages
// from, and whose changes it streams.
type sharedWatch struct {
	ws     *watches
	key    watchKey
	typ    *pbresource.Type
	cancel context.CancelFunc
	primed chan struct{} // closed at the first snapshot's end, or on failure
	refs   int           // under ws.mu
	idle   *time.Timer   // under ws.mu

	mu     sync.Mutex
	err    error                           // a refusal: the watch is over
	res    map[string]*pbresource.Resource // by rowKey; the watch's own, never changed
	sorted []string                        // res's keys in order; nil when stale
	subs   map[*subscriber]struct{}
}

func newSharedWatch(ws *watches, key watchKey, typ *pbresource.Type) *sharedWatch {
	ctx, cancel := context.WithCancel(ws.ctx)
	w := &sharedWatch{
		ws: ws, key: key, typ: typ, cancel: cancel,
		primed: make(chan struct{}),
		res:    map[string]*pbresource.Resource{},
		subs:   map[*subscriber]struct{}{},
	}
	go w.run(ctx)
	return w
}

func (w *sharedWatch) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// run watches until ctx ends or the server refuses the token, re-watching
// (after a pause that grows) whenever a stream ends.
func (w *sharedWatch) run(ctx context.Context) {
	defer w.closeSubscribers(errResync)
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := w.watch(ctx)
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
			w.fail(err)
			return
		}
		if ctx.Err() == nil {
			w.ws.logger.Debug("console watch ended; watching again", "type", w.key.typ, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func (w *sharedWatch) fail(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	select {
	case <-w.primed:
	default:
		close(w.primed)
	}
}

// watch runs one WatchList stream: the snapshot replaces what w held (and
// every live stream is told to reload), then each change is applied and
// handed to the streams it concerns.
func (w *sharedWatch) watch(ctx context.Context) error {
	ctx, cancel := context.WithCancel(userContext(ctx, w.key.token))
	defer cancel()
	st, err := w.ws.client.WatchList(ctx, &pbresource.WatchListRequest{
		Type:    w.typ,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
	})
	if err != nil {
		return err
	}
	snapshot, live := map[string]*pbresource.Resource{}, false
	for {
		ev, err := st.Recv()
		if err != nil {
			return err
		}
		switch {
		case ev.GetUpsert() != nil:
			res := ev.GetUpsert().GetResource()
			if live {
				w.apply(rowKey(res.GetId()), res)
			} else {
				snapshot[rowKey(res.GetId())] = res
			}
		case ev.GetDelete() != nil:
			key := rowKey(ev.GetDelete().GetResource().GetId())
			if live {
				w.apply(key, nil)
			} else {
				delete(snapshot, key)
			}
		case ev.GetEndOfSnapshot() != nil:
			w.reset(snapshot)
			snapshot, live = nil, true
		}
	}
}

// reset makes snapshot what w holds, and tells the live streams to reload.
func (w *sharedWatch) reset(snapshot map[string]*pbresource.Resource) {
	w.mu.Lock()
	w.res, w.sorted = snapshot, nil
	w.mu.Unlock()
	select {
	case <-w.primed:
		w.closeSubscribers(errResync)
	default:
		close(w.primed)
	}
}

// apply records a change (res nil: a deletion) and hands it to the
// streams whose window it falls in, encoded once for all of them.
func (w *sharedWatch) apply(key string, res *pbresource.Resource) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, had := w.res[key]
	if res == nil {
		delete(w.res, key)
	} else {
		w.res[key] = res
	}
	if had != (res != nil) {
		w.sorted = nil
	}
	var up, del []byte
	for s := range w.subs {
		if !s.inWindow(key) {
			continue
		}
		var msg []byte
		if res != nil && s.filter.matches(res) {
			if !had && !s.take() {
				// A new row past a full open-ended page: the page
				// reloads, and then has an end.
				w.dropLocked(s, errResync)
				continue
			}
			if up == nil {
				up = upsertMessage(res)
			}
			msg = up
		} else {
			if del == nil {
				del = deleteMessage(key)
			}
			msg = del
		}
		select {
		case s.ch <- msg:
		default:
			// The browser reads too slowly: it reloads its page rather
			// than being buffered without bound.
			w.dropLocked(s, errResync)
		}
	}
}

// page returns the resources of the window: those that match f, from
// the offset-th on, at most limit, with how many match in all.
func (w *sharedWatch) page(f filter, offset, limit int) (rows []*pbresource.Resource, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sorted == nil {
		w.sorted = make([]string, 0, len(w.res))
		for k := range w.res {
			w.sorted = append(w.sorted, k)
		}
		slices.Sort(w.sorted)
	}
	for _, k := range w.sorted {
		res := w.res[k]
		if !f.matches(res) {
			continue
		}
		if total >= offset && len(rows) < limit {
			rows = append(rows, res)
		}
		total++
	}
	return rows, total
}

// subscribe adds a live stream of the changes in s's window.
func (w *sharedWatch) subscribe(s *subscriber) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		s.end(w.err)
		return
	}
	w.subs[s] = struct{}{}
}

func (w *sharedWatch) unsubscribe(s *subscriber) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.subs, s)
}

func (w *sharedWatch) closeSubscribers(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.subs {
		w.dropLocked(s, err)
	}
}

func (w *sharedWatch) dropLocked(s *subscriber, err error) {
	delete(w.subs, s)
	s.end(err)
}

// errResync ends a live stream whose page must be loaded again.
var errResync = status.Error(codes.Aborted, "reload the page")

// subscriber is one browser's live stream of a type's page.
type subscriber struct {
	filter   filter
	from, to string // the window's first and last keys; to "" when open-ended
	// room is how many new rows an open-ended page may still show; once
	// they came, the next one makes the page reload (a page is windowed:
	// a burst of creates is not streamed to every open page whole).
	room int
	ch   chan []byte
	err  error // why ch was closed; read after it is
}

func newSubscriber(f filter, from, to string, room int) *subscriber {
	return &subscriber{filter: f, from: from, to: to, room: room, ch: make(chan []byte, subscriberBuffer)}
}

// take reports whether s may show one more new row, counting it.
func (s *subscriber) take() bool {
	if s.to != "" {
		return true
	}
	s.room--
	return s.room >= 0
}

func (s *subscriber) inWindow(key string) bool {
	return key >= s.from && (s.to == "" || key <= s.to)
}

// end closes the stream with err; the watch's lock is held.
func (s *subscriber) end(err error) {
	s.err = err
	close(s.ch)
}
