// Package pbresource is Loom's resource model and the ResourceService API,
// generated from resource.proto.
//
// The wire format (proto package, messages, field names and numbers, service
// and method names) matches hashicorp.consul.resource, so Consul's clients
// and tools work against a Loom server and a Loom controller can run against
// Consul. Loom may add fields, only with new numbers.
//
// # Loom's own registry
//
// The descriptor of pbresource/resource.proto and its
// types are registered in a registry of this package, not in protobuf-go's
// global ones (protoregistry.GlobalFiles and GlobalTypes): Consul's published
// package github.com/hashicorp/consul/proto-public/pbresource registers the
// same file path and full names there, and protobuf-go panics at init when
// one is registered twice. So a binary may link Consul's package, or types
// generated against it, beside this one, in any init order. `make proto`
// post-processes the generated code to do this (proto/internal/pbpatch).
//
// The price: code that looks messages up by name must ask Resolver, which
// answers from Loom's registry first and then from the global ones; the
// global registries do not know Loom's messages (or, when Consul's package is
// linked, answer with Consul's). That is protojson and prototext (the
// Resolver of their options), anypb.UnmarshalNew with
// proto.UnmarshalOptions{Resolver: Resolver} (not Any.UnmarshalNew, which
// asks the global registry) and gRPC server reflection
// (reflection.ServerOptions' DescriptorResolver and ExtensionResolver).
// proto.Marshal, proto.Unmarshal, anypb.New and Any.UnmarshalTo need no
// registry; a message's String method shows a tombstone's data undecoded.
package pbresource
