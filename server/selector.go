package server

import (
	"strings"

	"github.com/loomrt/loom/selector"
)

// parseSelector parses a request's label_selector, or returns an
// InvalidArgument status naming the field.
func parseSelector(raw string) (selector.Selector, error) {
	sel, err := selector.Parse(raw)
	if err != nil {
		return sel, invalidField("label_selector", "%s", strings.TrimPrefix(err.Error(), "label selector: "))
	}
	return sel, nil
}

// selectorHash folds a selector's canonical form into a page token's query
// hash, so that a token is refused for another selector. An empty selector
// leaves the hash unchanged (tokens issued without one stay valid).
func selectorHash(hash uint64, sel selector.Selector) uint64 {
	if sel.Empty() {
		return hash
	}
	for _, c := range []byte(sel.String()) {
		hash ^= uint64(c)
		hash *= 1099511628211 // FNV-1a's 64-bit prime
	}
	return hash
}
