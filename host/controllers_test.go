package host_test

import (
	"strings"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server/reaper"
)

// A host with -controllers=false serves the types its RegisterFunc
// registers, runs the reaper, and leaves the controllers it registers to
// a process of their own (here a Manager of the test's, over gRPC).
func TestServeTypesOnly(t *testing.T) {
	h := startHost(t, "-dev", "-controllers=false")
	conn := dialPlain(t, h.grpcAddr)
	remote := pbresource.NewResourceServiceClient(conn)
	resourcetest.RunControllers(t, remote, foo.BarController())
	client := resourcetest.NewClient(remote)

	bar := resourcetest.Resource(foo.BarV1Type, "b1").WithData(t, &pbfoov1.Bar{Baz: "b1"}).Write(t, remote)
	client.WaitForStatusCondition(t, bar.Id, foo.StatusKey, &pbresource.Condition{
		Type: foo.ConditionAccepted, State: pbresource.Condition_STATE_TRUE, Reason: foo.ReasonOk, Message: "the bar is valid"})

	// The reaper runs: deleting an owner removes what it owns.
	owner := resourcetest.Resource(foo.QuxType, "owner").WithData(t, &pbfoov1.Qux{}).Write(t, remote)
	child := resourcetest.Resource(foo.QuxType, "child").WithData(t, &pbfoov1.Qux{}).WithOwner(owner.Id).Write(t, remote)
	client.MustDelete(t, owner.Id)
	client.WaitForDeletion(t, child.Id)

	// The host's Manager runs the reaper and nothing else: a controller's
	// metrics appear when it starts.
	_, metrics := waitHTTP(t, "http://"+h.httpAddr+"/metrics", func(code int, body string) bool {
		return strings.Contains(body, `controller="`+reaper.ControllerName+`"`)
	})
	if strings.Contains(metrics, `controller="`+foo.BarControllerName+`"`) {
		t.Fatalf("the host runs the %s controller with -controllers=false", foo.BarControllerName)
	}
}
