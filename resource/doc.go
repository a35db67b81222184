// Package resource holds the helpers every part of Loom shares over the
// pbresource types: type, tenancy and ID comparison and string forms,
// references, status comparison, name and tenancy validation, ULIDs,
// reserved metadata keys, the gRPC metadata keys clients send (consistency
// mode, fence), and the type Registry with its hooks.
//
// It depends on nothing but the generated protobuf package, so servers,
// controllers and tests can all use it.
package resource
