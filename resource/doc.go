// Package resource holds the helpers every part of Loom shares over the
// pbresource types: type, tenancy and ID comparison and string forms,
// references, status comparison, name and tenancy validation, ULIDs,
// reserved metadata keys, the gRPC metadata keys clients send (consistency
// mode, fence), and the type Registry with its hooks.
//
// It depends on nothing but the generated protobuf package, so servers,
// controllers and tests can all use it.
//
// # Registering types
//
// A type is registered with Register (or MustRegister) and a
// Registration[T], which names the Go message of its Data once; its hooks
// receive the resource with its Data decoded, a *Decoded[T]. There is no
// separate untyped form: a type known only at run time (a dynamicpb message
// built from a descriptor) is a Registration[proto.Message] with its
// Message field set. A Registry holds types as Registered values, with the
// message type erased, which is how the server runs their hooks.
package resource
