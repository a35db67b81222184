package controller

import (
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
