package greeting

import (
	"context"
	"fmt"

	"github.com/loomrt/loom/controller"
	pbhellov1 "github.com/loomrt/loom/examples/hello/pbhello/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

const (
	// ControllerName is the name of the greeter controller.
	ControllerName = "greeter"

	// StatusKey is the status key the greeter writes.
	StatusKey = "hello.greeter"

	// ConditionGreeted is the condition of the greeter's status; its
	// message is the greeting.
	ConditionGreeted = "Greeted"

	// ReasonOk is the reason of a Greeted condition.
	ReasonOk = "Ok"
)

// Controller returns the greeter: for every Greeting it writes status
// StatusKey with condition Greeted (TRUE, reason Ok) whose message greets
// the Greeting's name ("Hello, Ann!"), saying which greeting it replies to
// if any. It writes only when the status changes, so it settles.
func Controller() *controller.Controller {
	return controller.NewController(ControllerName, Type).
		WithReconciler(reconcile.AsDecoded(greet, reconcile.DecodedReadOnly()))
}

// RegisterControllers adds the example's controllers to m.
func RegisterControllers(m *controller.Manager) error {
	return m.Register(Controller())
}

// Message is the greeting the greeter writes for g.
func Message(g *pbhellov1.Greeting) string {
	if g.GetReplyTo() != nil {
		return fmt.Sprintf("Hello, %s! (a reply to greeting %q)", g.Name, g.ReplyTo.Name)
	}
	return fmt.Sprintf("Hello, %s!", g.Name)
}

// greet reconciles one Greeting, read from the cache and decoded; it only
// reads it (DecodedReadOnly), so it gets the cache's own copy.
func greet(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, g *resource.Decoded[*pbhellov1.Greeting]) error {
	_, err := rt.WriteStatus(ctx, g.Resource, StatusKey, &pbresource.Status{Conditions: []*pbresource.Condition{{
		Type: ConditionGreeted, State: pbresource.Condition_STATE_TRUE, Reason: ReasonOk, Message: Message(g.Data),
	}}})
	return err
}
