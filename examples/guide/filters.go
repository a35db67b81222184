package guide

import (
	"strings"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/predicate"
)

// filteredBarController is barController with event filters.
func filteredBarController() *controller.Controller {
	return barController().
		// The controller's own status write changes nothing it reads.
		WithEventFilter(BarType, predicate.IgnoreOwnStatus("guide.bar")).
		// A Zip matters only when its data or metadata change,
		// and scratch Zips not at all.
		WithEventFilter(ZipType, predicate.GenerationChanged(), func(ev cache.Event) bool {
			return !strings.HasPrefix(ev.Resource.Id.Name, "scratch-")
		})
}
