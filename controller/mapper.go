package controller

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/runtime"
)

// mapperJob is one watched change waiting for its dependency mapper.
type mapperJob struct {
	mapper  runtime.DependencyMapper
	event   cache.Event
	attempt int
}

// inbox hands changes from the watch goroutines (which must never wait on a
// controller) to the controller's mapper goroutine. It grows as needed; it
// holds pointers to cached resources, not copies.
type inbox struct {
	mu     sync.Mutex
	jobs   []mapperJob
	signal chan struct{}
}

func (in *inbox) init() { in.signal = make(chan struct{}, 1) }

func (in *inbox) push(j mapperJob) {
	in.mu.Lock()
	in.jobs = append(in.jobs, j)
	in.mu.Unlock()
	select {
	case in.signal <- struct{}{}:
	default:
	}
}

func (in *inbox) take() []mapperJob {
	in.mu.Lock()
	defer in.mu.Unlock()
	jobs := in.jobs
	in.jobs = nil
	return jobs
}

// maxMapperAttempts bounds the retries of a failing mapper for one change.
const maxMapperAttempts = 8

// runMappers runs the dependency mappers of queued changes in order and
// queues the requests they return.
func (s *subscription) runMappers(ctx context.Context, rt runtime.Runtime, logger hclog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.inbox.signal:
		}
		for _, j := range s.inbox.take() {
			if ctx.Err() != nil {
				return
			}
			reqs, err := callMapper(ctx, rt, j)
			if err != nil {
				j.attempt++
				if j.attempt >= maxMapperAttempts {
					logger.Error("dependency mapper failed; giving up on this change", "resource", resource.IDString(j.event.Resource.Id), "error", err)
					continue
				}
				wait := time.Duration(1<<j.attempt) * 5 * time.Millisecond
				logger.Warn("dependency mapper failed; retrying", "resource", resource.IDString(j.event.Resource.Id), "error", err, "retry_in", wait)
				retry := j
				time.AfterFunc(wait, func() {
					if ctx.Err() == nil {
						s.inbox.push(retry)
					}
				})
				continue
			}
			for _, r := range reqs {
				if r.ID == nil {
					continue
				}
				s.queue.Add(r.Key(), r)
			}
		}
	}
}

func callMapper(ctx context.Context, rt runtime.Runtime, j mapperJob) (reqs []runtime.Request, err error) {
	err = safeCall(func() error {
		var e error
		reqs, e = j.mapper(ctx, rt, resource.Clone(j.event.Resource))
		return e
	})
	return reqs, err
}
