// Package pbresource is Loom's resource model and the ResourceService API,
// generated from resource.proto.
//
// The wire format (proto package, messages, field names and numbers, service
// and method names) matches hashicorp.consul.resource, so Consul's clients
// and tools work against a Loom server and a Loom controller can run against
// Consul. Loom may add fields, only with new numbers.
//
// Loom's own registry. The descriptor of pbresource/resource.proto and its
// types are registered in a registry of this package, not in protobuf-go's
// global ones (protoregistry.GlobalFiles and GlobalTypes), because Consul's
// published package github.com/hashicorp/consul/proto-public/pbresource
// registers the same file path and the same full names there: with both
// in the global registries a binary linking both would panic at init. So
// a controller may import types generated against Consul's package next to
// Loom's. The generated code is post-processed to do this (see `make proto`).
//
// The catch: code that looks messages up by name must ask Resolver rather
// than the global registries, or it will not find Loom's (nor, when Consul's
// package is linked, it finds Consul's). That is protojson and prototext
// (their options' Resolver field), anypb.UnmarshalNew and Any.UnmarshalNew
// (proto.UnmarshalOptions.Resolver) and gRPC server reflection
// (reflection.ServerOptions' DescriptorResolver and ExtensionResolver).
// Marshalling, Any.UnmarshalTo and anypb.New need no registry.
package pbresource
