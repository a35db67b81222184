package greeting_test

// The example's own package tests, with Loom's resourcetest kit: the real
// ResourceService in process, no host and no network.

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/hello/greeting"
	pbhellov1 "github.com/loomrt/loom/examples/hello/pbhello/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

func greeted(message string) *pbresource.Condition {
	return &pbresource.Condition{
		Type: greeting.ConditionGreeted, State: pbresource.Condition_STATE_TRUE,
		Reason: greeting.ReasonOk, Message: message,
	}
}

func TestGreeterGreetsAndSettles(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(greeting.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, svc.Client, greeting.Controller())

	ann := svc.Resource(greeting.Type, "ann").WithData(t, &pbhellov1.Greeting{}).Write(t, svc.Client)
	client.WaitForStatusCondition(t, ann.Id, greeting.StatusKey, greeted("Hello, ann!"))

	// A new name is greeted anew; then the greeter writes nothing more.
	svc.Resource(greeting.Type, "ann").WithData(t, &pbhellov1.Greeting{Name: "Ann"}).Write(t, svc.Client)
	client.WaitForStatusCondition(t, ann.Id, greeting.StatusKey, greeted("Hello, Ann!"))
	client.RequireSettled(t, 200*time.Millisecond, greeting.Type)
}

func TestGreetingValidation(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(greeting.RegisterTypes))
	for _, tc := range []struct {
		name  string
		data  *pbhellov1.Greeting
		field string // named in the error; empty: the write succeeds
	}{
		{"plain", &pbhellov1.Greeting{Name: "Ann"}, ""},
		{"longest", &pbhellov1.Greeting{Name: strings.Repeat("é", greeting.MaxNameLength)}, ""},
		{"too-long", &pbhellov1.Greeting{Name: strings.Repeat("é", greeting.MaxNameLength+1)}, `"name"`},
		{"reply", &pbhellov1.Greeting{ReplyTo: &pbresource.ID{Name: "ann"}}, ""},
		{"reply-unnamed", &pbhellov1.Greeting{ReplyTo: &pbresource.ID{}}, `"reply_to"`},
		{"reply-other-type", &pbhellov1.Greeting{ReplyTo: &pbresource.ID{Name: "ann", Type: &pbresource.Type{Group: "hello", GroupVersion: "v1", Kind: "Farewell"}}}, `"reply_to"`},
		{"reply-elsewhere", &pbhellov1.Greeting{ReplyTo: &pbresource.ID{Name: "ann", Tenancy: &pbresource.Tenancy{Namespace: "other"}}}, `"reply_to"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := svc.Resource(greeting.Type, tc.name).WithData(t, tc.data).Build()
			_, err := svc.Client.Write(context.Background(), &pbresource.WriteRequest{Resource: res})
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Write: %v", err)
			case tc.field != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("Write: got %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
}
