package resource

import (
	"errors"
	"fmt"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// Access is the kind of access a request needs.
type Access int

const (
	// AccessRead is reading one resource.
	AccessRead Access = iota + 1
	// AccessList is listing or watching resources of a type.
	AccessList
	// AccessWrite is creating, changing or deleting a resource, or writing
	// its status.
	AccessWrite
)

// String names the access.
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessList:
		return "list"
	case AccessWrite:
		return "write"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// Authorizer answers what the caller of one request may do. The server
// resolves one per request (see server.ACLResolver); ACL hooks receive it and
// may type-assert it to a richer interface of the host's own.
type Authorizer interface {
	// Allowed reports whether the caller has access to the resource named by
	// id. For AccessList, id carries the type and tenancy and an empty name.
	Allowed(access Access, id *pbresource.ID) bool
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(access Access, id *pbresource.ID) bool

// Allowed implements Authorizer.
func (f AuthorizerFunc) Allowed(access Access, id *pbresource.ID) bool { return f(access, id) }

// AllowAll is an Authorizer that allows everything, every Capability
// included: the default when a host configures no ACL resolver. It is
// comparable (AllowAll == AllowAll), so whoever compares Authorizers can
// tell it has not changed.
var AllowAll Authorizer = fixedAuthorizer(true)

// DenyAll is an Authorizer that allows nothing, no Capability included. It
// is comparable, like AllowAll.
var DenyAll Authorizer = fixedAuthorizer(false)

// fixedAuthorizer allows everything or nothing.
type fixedAuthorizer bool

func (a fixedAuthorizer) Allowed(Access, *pbresource.ID) bool { return bool(a) }
func (a fixedAuthorizer) AllowedCapability(Capability) bool   { return bool(a) }

// Capability is something a caller may be allowed to do that is not access
// to resources.
type Capability int

const (
	// CapabilityFence is presenting a fencing token (FenceMetadataKey) on
	// a write, as the controllers of a leader do: only callers allowed to
	// hold leader leases should. A write that carries a fence without it
	// is PermissionDenied.
	CapabilityFence Capability = iota + 1
	// CapabilityReflection is using gRPC server reflection.
	CapabilityReflection
	// CapabilityRestore is importing resources as they were exported
	// (loom.bulk.v1 Import with preserve): with the Uids, owner
	// references, finalizers, deletion marks and statuses given, which no
	// Write may set.
	CapabilityRestore
)

// String names the capability as an ACL file does.
func (c Capability) String() string {
	switch c {
	case CapabilityFence:
		return "fence"
	case CapabilityReflection:
		return "reflection"
	case CapabilityRestore:
		return "restore"
	}
	return fmt.Sprintf("Capability(%d)", int(c))
}

// CapabilityAuthorizer is an Authorizer that also answers for
// capabilities.
type CapabilityAuthorizer interface {
	Authorizer
	// AllowedCapability reports whether the caller has c.
	AllowedCapability(c Capability) bool
}

// HasCapability reports whether authz grants c. An Authorizer that is not
// a CapabilityAuthorizer grants none: capabilities are given explicitly.
func HasCapability(authz Authorizer, c Capability) bool {
	ca, ok := authz.(CapabilityAuthorizer)
	return ok && ca.AllowedCapability(c)
}

// ErrPermissionDenied is returned (possibly wrapped) by ACL hooks to refuse
// a request; the server answers PermissionDenied.
var ErrPermissionDenied = errors.New("permission denied")

// ACLHooks overrides the authorization checks of a type whose Data holds a
// T. A nil hook falls back to the default check, which asks the Authorizer
// for the matching Access.
type ACLHooks[T proto.Message] struct {
	// Read authorizes reading id. res is the stored resource with its Data
	// decoded, or nil when it does not exist (so a hook can refuse before
	// revealing that) or is stored under another GroupVersion (the hook of
	// that GroupVersion's type is asked too, with it).
	Read func(authz Authorizer, id *pbresource.ID, res *Decoded[T]) error

	// Write authorizes writing res (for Delete and WriteStatus, the stored
	// resource). For a Delete or WriteStatus of a resource that does not
	// exist, or is stored under another GroupVersion (the hook of that
	// GroupVersion's type is asked too, with it), res holds only the ID and
	// Data is the zero T.
	Write func(authz Authorizer, res *Decoded[T]) error

	// List authorizes listing or watching the type in tenancy. Read is
	// still applied to each listed resource.
	List func(authz Authorizer, tenancy *pbresource.Tenancy) error
}

func allowedOrDenied(authz Authorizer, access Access, id *pbresource.ID) error {
	if authz.Allowed(access, id) {
		return nil
	}
	return fmt.Errorf("%w: %s access to %s", ErrPermissionDenied, access, ReferenceString(id))
}
