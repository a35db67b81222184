package condition_test

import (
	"fmt"

	"github.com/loomrt/loom/condition"
	"github.com/loomrt/loom/proto/pbresource"
)

// A reconciler copies its status, sets the condition it decides this time
// and keeps the others, then writes the copy with rt.WriteStatus (which
// writes only when it differs from the stored one).
func ExampleSet() {
	order := &pbresource.Resource{
		Generation: "01J2",
		Status: map[string]*pbresource.Status{"shop.order": {
			ObservedGeneration: "01J1",
			Conditions: []*pbresource.Condition{
				condition.True("Accepted", "Valid", "the order is valid"),
				condition.False("Shipped", "Waiting", "waiting for the shipment"),
			},
		}},
	}
	st := condition.CopyStatus(order, "shop.order")
	changed := condition.Set(st, condition.True("Shipped", "Delivered", "the shipment arrived"))
	fmt.Println(changed, condition.IsTrue(st, "Shipped"), condition.IsTrue(st, "Accepted"))
	fmt.Println(condition.IsTrue(order.Status["shop.order"], "Shipped"))
	// Output:
	// true true true
	// false
}
