package controller

import (
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
)

// TestRequestLoggerIsLazy: a reconcile that logs nothing at an enabled level
// pays for the request logger itself, not for hclog's With.
func TestRequestLoggerIsLazy(t *testing.T) {
	base := hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Info})
	req := reconcile.Request{ID: &pbresource.ID{Name: "a", Tenancy: &pbresource.Tenancy{Partition: "p", Namespace: "n"}}}
	var sink hclog.Logger
	quiet := testing.AllocsPerRun(100, func() {
		l := newRequestLogger(base, req)
		l.Debug("below the level")
		sink = l
	})
	assert.Equal(t, 1.0, quiet, "only the request logger itself")
	l := newRequestLogger(base, req)
	l.Debug("below the level")
	assert.Nil(t, l.with, "not built for a message below the level")
	l.Info("logged")
	assert.Equal(t, []interface{}{"request", "p/n/a"}, l.ImpliedArgs())
	_ = sink
}

// TestRequestLoggersKeepTheirRequest: the loggers a worker hands out from
// its slabs are each their request's, even when a reconciler keeps its
// logger past its reconcile and later ones are handed out meanwhile.
func TestRequestLoggersKeepTheirRequest(t *testing.T) {
	base := hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Info})
	var ls requestLoggers
	var kept []*requestLogger
	for i := 0; i < 2*loggerSlab+3; i++ {
		id := &pbresource.ID{Name: fmt.Sprint(i), Tenancy: &pbresource.Tenancy{Partition: "p", Namespace: "n"}}
		kept = append(kept, ls.next(base, reconcile.Request{ID: id}))
	}
	for i, l := range kept {
		l.Info("logged")
		assert.Equal(t, []interface{}{"request", "p/n/" + fmt.Sprint(i)}, l.ImpliedArgs())
	}
	per := testing.AllocsPerRun(10*loggerSlab, func() { _ = ls.next(base, reconcile.Request{ID: kept[0].id}) })
	assert.Less(t, per, 0.1, "one allocation per slab")
}
