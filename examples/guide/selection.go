package guide

import (
	"fmt"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/selector"
)

// selectedBarController is barController for the Bars, and the Zips, that
// selection (a label selector such as "team=payments", from a flag) selects.
func selectedBarController(selection string) (*controller.Controller, error) {
	sel, err := selector.Parse(selection)
	if err != nil {
		return nil, fmt.Errorf("-selector: %w", err)
	}
	return barController().
		WithSelector(BarType, sel).
		WithSelector(ZipType, sel), nil
}
