package robustness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Config is the shape of one run.
type Config struct {
	// Seed fixes every client's and watcher's random choices.
	Seed uint64
	// Clients is how many clients run operations at once (default 4).
	Clients int
	// Ops is how many operations each client runs (default 200).
	Ops int
	// Names is how many resource names the clients share (default 3):
	// fewer names, more contention.
	Names int
	// Watchers is how many WatchList streams are kept open during the run
	// (default 2). Each is broken off at random and opened again; the
	// first reads slowly when SlowWatcher is set.
	Watchers int
	// SlowWatcher makes the first watcher sleep up to 2ms before each
	// Recv, a consumer the server must buffer for or end.
	SlowWatcher bool
	// Finalizers makes Writes set finalizers, so that Deletes mark
	// resources and Writes remove finalizers. The watch checks are weaker
	// for marked resources: a mark's Version is known only if a strong
	// read or a later write returned it.
	Finalizers bool
	// Between, when set, runs before each client operation; a fault
	// injector (e.g. the cluster test's) may block or act in it. It gets
	// the client's number and its random source; when it returns false,
	// the client runs no more operations (its server is gone, say).
	Between func(client int, rng *rand.Rand) bool
	// Indeterminate, when set, tells which errors leave an operation's
	// outcome open (e.g. Unavailable or DeadlineExceeded once servers or
	// etcd members fail): such a Write, WriteStatus or Delete is checked
	// as having taken effect or not, and such a Read or List as having
	// returned nothing (Output.Unknown). Without it, every error the model
	// does not expect fails the check.
	Indeterminate func(codes.Code) bool
	// Connect, when set, gives each client (0 to Clients-1), watcher
	// (Clients to Clients+Watchers-1) and the run's final steps
	// (Clients+Watchers) a client of its own instead of the one Run is
	// given, e.g. of one of several servers, and names that server.
	// Eventual reads are only held monotonic against reads and events of
	// the same server.
	Connect func(i int) (client pbresource.ResourceServiceClient, server int)
	// Type is the example type written: foo.v1.Bar (nil, the default) or
	// foo.v1.Zip, which no example controller writes to (the servers of
	// the cluster test run the Bar controller, whose writes the model
	// does not know).
	Type *pbresource.Type
}

func (c *Config) defaults() {
	if c.Clients <= 0 {
		c.Clients = 4
	}
	if c.Ops <= 0 {
		c.Ops = 200
	}
	if c.Names <= 0 {
		c.Names = 3
	}
	if c.Watchers < 0 {
		c.Watchers = 0
	} else if c.Watchers == 0 {
		c.Watchers = 2
	}
}

// errNotSettled ends a watch that did not deliver the run's last write in
// time; the check reports it.
const errNotSettled = "it did not deliver the last write within 30s"

// connect returns the client and server of worker i (see Config.Connect).
func (c *Config) connect(client pbresource.ResourceServiceClient, i int) (pbresource.ResourceServiceClient, int) {
	if c.Connect == nil {
		return client, 0
	}
	return c.Connect(i)
}

// sentinel is the name of the resource written once every client has
// stopped: a watch that delivered it has delivered the whole run.
const sentinel = "sentinel"

// fakeUid is a well-formed Uid that no resource has.
const fakeUid = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

// Run runs the workload of cfg against client and returns its history. It
// returns an error only when the run itself could not finish (ctx ended,
// the last write failed); what the checks find is for Check.
func Run(ctx context.Context, client pbresource.ResourceServiceClient, cfg Config) (*History, error) {
	cfg.defaults()
	ex, err := exampleFor(cfg.Type)
	if err != nil {
		return nil, err
	}
	h := newHistory(cfg.Seed)
	names := make([]string, cfg.Names)
	for i := range names {
		names[i] = fmt.Sprintf("r%d", i)
	}

	var settle atomic.Uint64 // the version of the last write, once made
	var watchers sync.WaitGroup
	for i := range cfg.Watchers {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(1000+i)))
			wclient, server := cfg.connect(client, cfg.Clients+i)
			runWatcher(ctx, wclient, ex, server, h, i, rng, cfg.SlowWatcher && i == 0, &settle)
		}()
	}

	var clients sync.WaitGroup
	for c := range cfg.Clients {
		clients.Add(1)
		go func() {
			defer clients.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)))
			cclient, server := cfg.connect(client, c)
			cl := &runner{id: c, ex: ex, client: cclient, server: server, h: h, rng: rng, names: names, known: make(map[string]State),
				indeterminate: cfg.Indeterminate, finalizers: cfg.Finalizers}
			for range cfg.Ops {
				if ctx.Err() != nil {
					return
				}
				if cfg.Between != nil && !cfg.Between(c, rng) {
					return
				}
				cl.step(ctx)
			}
		}()
	}
	clients.Wait()
	if err := ctx.Err(); err != nil {
		watchers.Wait()
		return h, err
	}

	// The last write, then every watch catches up with it, then the final
	// state of the store.
	lclient, server := cfg.connect(client, cfg.Clients+cfg.Watchers)
	last := &runner{id: cfg.Clients, ex: ex, client: lclient, server: server, h: h, names: names, known: make(map[string]State),
		indeterminate: cfg.Indeterminate}
	end := last.write(ctx, Input{Kind: KindWrite, Name: sentinel, Baz: "end"})
	for try := 0; end.Output.Unknown && try < 10; try++ {
		end = last.write(ctx, Input{Kind: KindWrite, Name: sentinel, Baz: "end"}) // the same again: a no-op if it took effect
	}
	if end.Output.Code != codes.OK {
		return h, fmt.Errorf("the final write failed: %s", end.Err)
	}
	settle.Store(versionNumber(end.Output.Res.Version))
	watchers.Wait()
	h.Final = make(map[string]State)
	for _, name := range append(names, sentinel) {
		op := last.read(ctx, Input{Kind: KindReadStrong, Name: name})
		for try := 0; op.Output.Unknown && try < 10; try++ {
			op = last.read(ctx, Input{Kind: KindReadStrong, Name: name})
		}
		switch op.Output.Code {
		case codes.OK:
			h.Final[name] = op.Output.Res
		case codes.NotFound:
		default:
			return h, fmt.Errorf("reading the final state of %s: %s", name, op.Err)
		}
	}
	return h, nil
}

// runner is one client.
type runner struct {
	id     int
	ex     exampleType
	client pbresource.ResourceServiceClient
	server int // see Config.Connect
	h      *History
	rng    *rand.Rand
	names  []string
	// known is the newest resource the client saw per name, where it takes
	// the Versions and Uids it sends (mostly right, sometimes stale).
	known         map[string]State
	indeterminate func(codes.Code) bool
	finalizers    bool
}

func (r *runner) step(ctx context.Context) {
	in := Input{Name: r.names[r.rng.IntN(len(r.names))]}
	known, isKnown := r.known[in.Name]
	pick := func(p float64) bool { return r.rng.Float64() < p }
	version := func() string {
		switch {
		case isKnown && pick(0.6):
			return known.Version
		case pick(0.1):
			return "1" // stale
		}
		return ""
	}
	uid := func(p float64) string {
		switch {
		case isKnown && pick(p):
			return known.Uid
		case pick(0.05):
			return fakeUid
		}
		return ""
	}
	switch n := r.rng.IntN(100); {
	case n < 35:
		in.Kind = KindWrite
		in.Version = version()
		in.Uid = uid(0.2)
		if isKnown && known.Deletion != "" && pick(0.8) {
			// What a controller does with a resource marked for deletion:
			// remove its finalizer.
			in.Baz, in.Label, in.Deletion = known.Baz, known.Label, known.Deletion
			fs := strings.Fields(known.Finalizers)
			if len(fs) > 0 {
				i := r.rng.IntN(len(fs))
				fs = append(fs[:i:i], fs[i+1:]...)
			}
			in.Finalizers = strings.Join(fs, " ")
		} else {
			in.Baz = []string{"a", "b", "c"}[r.rng.IntN(3)]
			in.Label = []string{"", "x", "y"}[r.rng.IntN(3)]
			if r.finalizers {
				in.Finalizers = []string{"", "", "f1", "f1 f2"}[r.rng.IntN(4)]
			}
			if isKnown && known.Deletion != "" && pick(0.5) {
				in.Deletion = known.Deletion
			}
		}
		r.write(ctx, in)
	case n < 47:
		in.Kind = KindWriteStatus
		in.Version = version()
		in.Uid = uid(0.95)
		if in.Uid == "" {
			in.Uid = fakeUid
		}
		in.Status = fmt.Sprintf("%s%02d", fakeUid[:24], r.rng.IntN(100)) // a ULID
		r.write(ctx, in)
	case n < 54:
		in.Kind = KindDelete
		in.Version = version()
		in.Uid = uid(0.2)
		r.write(ctx, in)
	case n < 74:
		in.Kind = KindReadStrong
		r.read(ctx, in)
	case n < 92:
		in.Kind = KindReadEventual
		r.read(ctx, in)
	default:
		r.list(ctx)
	}
}

// write runs a Write, WriteStatus or Delete and records it.
func (r *runner) write(ctx context.Context, in Input) Op {
	op := Op{Client: r.id, Server: r.server, Input: in, Call: r.h.now()}
	var res *pbresource.Resource
	var err error
	switch in.Kind {
	case KindWrite:
		data, _ := r.ex.data(in.Baz)
		w := &pbresource.Resource{Id: r.ex.id(in.Name, in.Uid), Version: in.Version, Data: data}
		for k, v := range map[string]string{LabelKey: in.Label, resource.FinalizerKey: in.Finalizers, resource.DeletionTimestampKey: in.Deletion} {
			if v == "" {
				continue
			}
			if w.Metadata == nil {
				w.Metadata = make(map[string]string)
			}
			w.Metadata[k] = v
		}
		var rsp *pbresource.WriteResponse
		if rsp, err = r.client.Write(ctx, &pbresource.WriteRequest{Resource: w}); err == nil {
			res = rsp.Resource
		}
	case KindWriteStatus:
		var rsp *pbresource.WriteStatusResponse
		rsp, err = r.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{
			Id: r.ex.id(in.Name, in.Uid), Version: in.Version, Key: StatusKey,
			Status: &pbresource.Status{ObservedGeneration: in.Status},
		})
		if err == nil {
			res = rsp.Resource
		}
	case KindDelete:
		_, err = r.client.Delete(ctx, &pbresource.DeleteRequest{Id: r.ex.id(in.Name, in.Uid), Version: in.Version})
	}
	op.Return = r.h.now()
	return r.record(op, res, err)
}

// read runs a strong or eventual Read and records it.
func (r *runner) read(ctx context.Context, in Input) Op {
	if in.Kind == KindReadStrong {
		ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	}
	op := Op{Client: r.id, Server: r.server, Input: in, Call: r.h.now()}
	rsp, err := r.client.Read(ctx, &pbresource.ReadRequest{Id: r.ex.id(in.Name, "")})
	op.Return = r.h.now()
	return r.record(op, rsp.GetResource(), err)
}

// list runs a List of every Bar and records it.
func (r *runner) list(ctx context.Context) {
	op := Op{Client: r.id, Server: r.server, Input: Input{Kind: KindList}, Call: r.h.now()}
	rsp, err := r.client.List(ctx, &pbresource.ListRequest{
		Type: copyType(r.ex.typ), Tenancy: r.ex.ten(),
	})
	op.Return = r.h.now()
	if err == nil {
		for _, res := range rsp.Resources {
			s := stateOf(res)
			op.Output.List = append(op.Output.List, s)
			r.see(s)
		}
	}
	r.record(op, nil, err)
}

func (r *runner) record(op Op, res *pbresource.Resource, err error) Op {
	if err != nil {
		op.Output.Code = status.Code(err)
		op.Err = err.Error()
		op.Output.Unknown = r.indeterminate != nil && r.indeterminate(op.Output.Code)
	} else if res != nil {
		op.Output.Res = stateOf(res)
		r.see(op.Output.Res)
	}
	r.h.add(op)
	return op
}

// see remembers the newest resource seen under its name.
func (r *runner) see(s State) {
	if k, ok := r.known[s.Name]; !ok || versionNumber(s.Version) >= versionNumber(k.Version) {
		r.known[s.Name] = s
	}
}

// runWatcher keeps one WatchList stream of every Bar open until ctx ends
// or the run's last write (whose Version arrives in settle) was delivered
// by one of its streams, which is then Settled. Until then, it breaks
// every stream off after a random number of events (below 300) and opens
// a new one that resumes (since_version) from the last version the broken
// one delivered: its events go on in the same WatchRecord, so the
// validator checks the resumed watch exactly as one unbroken stream. When
// the server cannot resume (NewSnapshot), or a stream fails before it
// delivered anything to resume from, the next stream is a new record.
func runWatcher(ctx context.Context, client pbresource.ResourceServiceClient, ex exampleType, server int, h *History, id int, rng *rand.Rand,
	slow bool, settle *atomic.Uint64,
) {
	var deadline time.Time // for settling, once the last write is known
	var rec *WatchRecord   // the record a resumed stream goes on in
	resume := ""           // the last version rec's streams delivered
	for n := 0; ctx.Err() == nil; n++ {
		if resume == "" {
			rec = &WatchRecord{ID: id*100000 + n, Server: server, Opened: h.now()}
			h.addWatch(rec)
		}
		wctx, cancel := context.WithCancel(ctx)
		// Odd watchers ask for batches of events, as the Manager's cache
		// does (a server sends them over gRPC only), and read them one
		// by one.
		stream, err := client.WatchList(wctx, &pbresource.WatchListRequest{
			Type: copyType(ex.typ), Tenancy: ex.ten(), SinceVersion: resume, BatchEvents: id%2 == 1,
		})
		if err != nil {
			rec.End = err.Error()
			resume = ""
			cancel()
			time.Sleep(10 * time.Millisecond) // a pause before watching again, not a wait for a condition
			continue
		}
		stream = pbresource.Unbatched(stream)
		breakAfter := rng.IntN(300) // events until the stream is broken off; -1: never
		var delay []time.Duration   // the slow reader's delays, drawn here: rng is not shared
		if slow {
			for range 1000 {
				delay = append(delay, time.Duration(rng.IntN(2000))*time.Microsecond)
			}
		}
		// The receiving goroutine owns last, live and resume until it sends
		// on ended; current is the record its events go to.
		var current atomic.Pointer[WatchRecord]
		current.Store(rec)
		received := atomic.Int64{}
		// last is the version to resume from: only once the stream is past
		// its snapshot (a snapshot's resources are in no version order).
		last, live := resume, resume != ""
		ended := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				if len(delay) > 0 {
					time.Sleep(delay[i%len(delay)]) // a slow consumer: the fault injected
				}
				ev, err := stream.Recv()
				if err != nil {
					resume = ""
					if live {
						resume = last
					}
					ended <- err
					return
				}
				if ev.GetNewSnapshot() != nil {
					// No resume: what follows is a fresh snapshot, a new record.
					fresh := &WatchRecord{ID: id*100000 + n, Server: server, Opened: h.now()}
					h.addWatch(fresh)
					current.Load().End = "resume refused: NewSnapshot"
					current.Store(fresh)
					live = false
					continue
				}
				if ev.GetEndOfSnapshot() != nil {
					live = true
				}
				if v := eventVersion(ev); v != "" && live {
					last = v
				}
				current.Load().add(recordEvent(ev, h.now()))
				received.Add(1)
			}
		}()
		tick := time.NewTicker(time.Millisecond)
		done := false
	wait:
		for {
			select {
			case err := <-ended:
				rec = current.Load()
				rec.End = endOf(err)
				break wait
			case <-tick.C:
			}
			target := settle.Load()
			cur := current.Load()
			switch {
			case target != 0 && cur.delivered(target):
				cur.Settled = true
				cancel()
				rec = cur
				rec.End = endOf(<-ended)
				done = true
				break wait
			case target != 0 && deadline.IsZero():
				deadline = time.Now().Add(30 * time.Second)
			case target != 0 && time.Now().After(deadline):
				cancel()
				rec = cur
				rec.End = endOf(<-ended) + " (" + errNotSettled + ")"
				done = true
				break wait
			case target == 0 && breakAfter >= 0 && int(received.Load()) >= breakAfter:
				cancel() // a broken stream: the fault injected
				breakAfter = -1
			}
		}
		tick.Stop()
		cancel()
		if done {
			return
		}
	}
}

// eventVersion returns the store version an event brings a watch to (its
// resume point), or "" if it gives none.
func eventVersion(ev *pbresource.WatchEvent) string {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return e.Upsert.GetResource().GetVersion()
	case *pbresource.WatchEvent_Delete_:
		return e.Delete.GetVersion()
	case *pbresource.WatchEvent_EndOfSnapshot_:
		return e.EndOfSnapshot.GetVersion()
	case *pbresource.WatchEvent_Bookmark_:
		return e.Bookmark.GetVersion()
	}
	return ""
}

func endOf(err error) string {
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	return err.Error()
}

// recordEvent converts a WatchEvent.
func recordEvent(ev *pbresource.WatchEvent, at int64) WatchEvent {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return WatchEvent{Kind: EventUpsert, Res: stateOf(e.Upsert.Resource), At: at}
	case *pbresource.WatchEvent_Delete_:
		return WatchEvent{Kind: EventDelete, Res: stateOf(e.Delete.Resource), At: at}
	}
	return WatchEvent{Kind: EventEndOfSnapshot, At: at}
}
