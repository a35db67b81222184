package resource

import (
	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// Decoded is a resource together with its decoded Data.
type Decoded[T proto.Message] struct {
	Resource *pbresource.Resource
	Data     T
}
