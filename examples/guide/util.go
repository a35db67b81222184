package guide

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func anyOf(m proto.Message) (*anypb.Any, error) { return anypb.New(m) }
