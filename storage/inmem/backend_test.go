package inmem_test

import (
	"testing"

	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/conformance"
	"github.com/loomrt/loom/storage/inmem"
)

func TestBackend(t *testing.T) {
	conformance.Test(t, func(t *testing.T) storage.Backend {
		return inmem.New()
	})
}
