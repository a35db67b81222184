package controller

import (
	"errors"
	"time"

	"github.com/loomrt/loom/reconcile"
)

func requeueAfter(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false // without the errors.As below, which allocates
	}
	var r reconcile.RequeueAfterError
	if errors.As(err, &r) {
		return time.Duration(r), true
	}
	return 0, false
}
