package pbresource

import (
	"errors"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Loom's own registries of resource.proto's descriptor and types (see the
// package doc). resource.pb.go's init fills them through fileRegistry and
// typeRegistry; nothing else registers here.
var (
	files = new(protoregistry.Files)
	types = new(protoregistry.Types)
)

// Registry looks descriptors and types up in Loom's registry first, then in
// protobuf-go's global registries.
type Registry struct{}

// Resolver is the Registry to use wherever protobuf-go or gRPC would
// otherwise look messages up in the global registries.
var Resolver Registry

// Compile-time checks that Resolver fits where it is meant to go.
var (
	_ interface {
		protoregistry.ExtensionTypeResolver
		protoregistry.MessageTypeResolver
	} = Resolver // protojson, prototext, proto.UnmarshalOptions
	_ interface {
		FindFileByPath(string) (protoreflect.FileDescriptor, error)
		FindDescriptorByName(protoreflect.FullName) (protoreflect.Descriptor, error)
	} = Resolver // protodesc.Resolver, reflection.ServerOptions.DescriptorResolver
	_ interface {
		protoregistry.ExtensionTypeResolver
		RangeExtensionsByMessage(protoreflect.FullName, func(protoreflect.ExtensionType) bool)
	} = Resolver // reflection.ServerOptions.ExtensionResolver
)

// firstFound returns own's answer unless it is NotFound, then global's.
func firstFound[T any](own func() (T, error), global func() (T, error)) (T, error) {
	v, err := own()
	if errors.Is(err, protoregistry.NotFound) {
		return global()
	}
	return v, err
}

// FindFileByPath returns the file descriptor registered under path.
func (Registry) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	return firstFound(
		func() (protoreflect.FileDescriptor, error) { return files.FindFileByPath(path) },
		func() (protoreflect.FileDescriptor, error) { return protoregistry.GlobalFiles.FindFileByPath(path) })
}

// FindDescriptorByName returns the descriptor of the given full name.
func (Registry) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	return firstFound(
		func() (protoreflect.Descriptor, error) { return files.FindDescriptorByName(name) },
		func() (protoreflect.Descriptor, error) { return protoregistry.GlobalFiles.FindDescriptorByName(name) })
}

// FindMessageByName returns the message type of the given full name.
func (Registry) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	return firstFound(
		func() (protoreflect.MessageType, error) { return types.FindMessageByName(name) },
		func() (protoreflect.MessageType, error) { return protoregistry.GlobalTypes.FindMessageByName(name) })
}

// FindMessageByURL returns the message type of a type URL such as an Any's.
func (Registry) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	return firstFound(
		func() (protoreflect.MessageType, error) { return types.FindMessageByURL(url) },
		func() (protoreflect.MessageType, error) { return protoregistry.GlobalTypes.FindMessageByURL(url) })
}

// FindEnumByName returns the enum type of the given full name.
func (Registry) FindEnumByName(name protoreflect.FullName) (protoreflect.EnumType, error) {
	return firstFound(
		func() (protoreflect.EnumType, error) { return types.FindEnumByName(name) },
		func() (protoreflect.EnumType, error) { return protoregistry.GlobalTypes.FindEnumByName(name) })
}

// FindExtensionByName returns the extension type of the given full name.
func (Registry) FindExtensionByName(name protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return firstFound(
		func() (protoreflect.ExtensionType, error) { return types.FindExtensionByName(name) },
		func() (protoreflect.ExtensionType, error) { return protoregistry.GlobalTypes.FindExtensionByName(name) })
}

// FindExtensionByNumber returns the extension of message with field number num.
func (Registry) FindExtensionByNumber(message protoreflect.FullName, num protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return firstFound(
		func() (protoreflect.ExtensionType, error) { return types.FindExtensionByNumber(message, num) },
		func() (protoreflect.ExtensionType, error) {
			return protoregistry.GlobalTypes.FindExtensionByNumber(message, num)
		})
}

// RangeExtensionsByMessage calls f for each extension of message, Loom's
// first, until f returns false.
func (Registry) RangeExtensionsByMessage(message protoreflect.FullName, f func(protoreflect.ExtensionType) bool) {
	more := true
	types.RangeExtensionsByMessage(message, func(xt protoreflect.ExtensionType) bool {
		more = f(xt)
		return more
	})
	if more {
		protoregistry.GlobalTypes.RangeExtensionsByMessage(message, f)
	}
}

// fileRegistry is where resource.pb.go's init registers the file's
// descriptor: in Loom's registry, with its imports (any.proto,
// timestamp.proto) resolved through Resolver.
var fileRegistry ownFiles

// typeRegistry is where resource.pb.go's init registers the file's types.
var typeRegistry = types

// ownFiles registers into Loom's registry and looks up through Resolver.
type ownFiles struct{}

func (ownFiles) RegisterFile(fd protoreflect.FileDescriptor) error { return files.RegisterFile(fd) }

func (ownFiles) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	return Resolver.FindFileByPath(path)
}

func (ownFiles) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	return Resolver.FindDescriptorByName(name)
}
