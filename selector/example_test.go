package selector_test

import (
	"fmt"

	"github.com/loomrt/loom/selector"
)

func Example() {
	sel, err := selector.Parse("team=payments, tier in (web,api), !legacy")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sel)
	fmt.Println(sel.Matches(map[string]string{"team": "payments", "tier": "api"}))
	fmt.Println(sel.Matches(map[string]string{"team": "payments", "tier": "api", "legacy": "yes"}))

	_, err = selector.Parse("finalizers")
	fmt.Println(err)
	// Output:
	// !legacy,team=payments,tier in (api,web)
	// true
	// false
	// label selector: at position 0: "finalizers" is a reserved metadata key, not a label
}
