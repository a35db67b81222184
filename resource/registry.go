package resource

import (
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Registration describes a resource type whose Data holds a T: its
// identity, where it lives, and the hooks the ResourceService runs on it.
// Register it with Register (or MustRegister).
//
// The hooks receive the resource with its Data already decoded: the server
// decodes Data once per request, and encodes it again (deterministically)
// only when Mutate changed it.
type Registration[T proto.Message] struct {
	// Type is the group, version and kind. Required.
	Type *pbresource.Type

	// Scope says which tenancy units the type's resources have. Required.
	Scope Scope

	// Message is T's message type. Leave it nil when T names a generated
	// message (the usual case); it is needed only for a type known at run
	// time, where T is proto.Message or *dynamicpb.Message.
	Message protoreflect.MessageType

	// Mutate, if set, may change a resource before it is validated and
	// stored (e.g. fill in defaults or normalise input). It runs on every
	// Write and in MutateAndValidate, on the server's own copy of the
	// request. It may change res.Data (or replace it with another T) and
	// res.Resource's metadata; it must not change the ID. res.Resource.Data
	// is the encoded form of the Data the request held; the server replaces
	// it after Mutate when Data changed.
	Mutate func(res *Decoded[T]) error

	// Validate, if set, checks a resource after Mutate. An error rejects the
	// write with InvalidArgument; wrap it in ErrInvalidField to name the
	// offending field. It must not change res.
	Validate func(res *Decoded[T]) error

	// ACLs, if set, replaces the default authorization checks for the type.
	ACLs *ACLHooks[T]
}

// Register adds the type reg describes to r. It returns an error when the
// registration is invalid or the type is already registered.
func Register[T proto.Message](r Registry, reg Registration[T]) error {
	t, err := reg.erase()
	if err != nil {
		return err
	}
	return r.Add(t)
}

// MustRegister is Register that panics on error: both errors are
// programming errors that should stop a server at start-up.
func MustRegister[T proto.Message](r Registry, reg Registration[T]) {
	if err := Register(r, reg); err != nil {
		panic(err)
	}
}

// Registered is a registered resource type as a Registry holds it and the
// server runs it: a Registration with its message type erased. Make one
// with Register; its hooks run through its methods.
type Registered struct {
	// Type is the group, version and kind.
	Type *pbresource.Type
	// Scope says which tenancy units the type's resources have.
	Scope Scope
	// Message is the type of the message the resources' Data holds.
	Message protoreflect.MessageType

	hooks hooks // nil for a type without hooks
}

// Registry holds the known resource types. Implementations are safe for
// concurrent use; registration normally happens at start-up.
type Registry interface {
	// Add adds a type (see Register). It returns an error when the type is
	// invalid or already registered.
	Add(t Registered) error

	// Resolve returns the registered type typ (GroupVersion included).
	Resolve(typ *pbresource.Type) (Registered, bool)

	// Types returns every registered type, ordered by type string.
	Types() []Registered
}

// versionedType is a type with its GroupVersion: the key of a registration.
type versionedType struct{ group, version, kind string }

// TypeRegistry is the standard Registry.
//
// Its map is replaced, never changed, by Add, so Resolve (every request
// resolves its type) reads it without a lock: a read lock shared by the
// goroutines of several cores moves its cache line between them on every
// call.
type TypeRegistry struct {
	mu    sync.Mutex // serializes Add
	types atomic.Pointer[map[versionedType]Registered]
}

// NewRegistry returns an empty registry.
func NewRegistry() *TypeRegistry {
	return new(TypeRegistry)
}

// load returns the registered types, which nobody may change.
func (r *TypeRegistry) load() map[versionedType]Registered {
	if p := r.types.Load(); p != nil {
		return *p
	}
	return nil
}

// Add implements Registry.
func (r *TypeRegistry) Add(reg Registered) error {
	if err := reg.check(); err != nil {
		return err
	}
	key := keyOf(reg.Type)
	r.mu.Lock()
	defer r.mu.Unlock()
	types := r.load()
	if _, ok := types[key]; ok {
		return fmt.Errorf("registering type %s: already registered", TypeString(reg.Type))
	}
	for k, other := range types {
		if k.group == key.group && k.kind == key.kind && other.Scope != reg.Scope {
			return fmt.Errorf("registering type %s: scope %s differs from %s's scope %s; every version of a type must share its scope",
				TypeString(reg.Type), reg.Scope, TypeString(other.Type), other.Scope)
		}
	}
	reg.Type = cloneType(reg.Type)
	next := maps.Clone(types)
	if next == nil {
		next = make(map[versionedType]Registered, 1)
	}
	next[key] = reg
	r.types.Store(&next)
	return nil
}

// Resolve implements Registry.
func (r *TypeRegistry) Resolve(typ *pbresource.Type) (Registered, bool) {
	if typ == nil {
		return Registered{}, false
	}
	reg, ok := r.load()[keyOf(typ)]
	return reg, ok
}

// Types implements Registry.
func (r *TypeRegistry) Types() []Registered {
	types := r.load()
	out := make([]Registered, 0, len(types))
	for _, reg := range types {
		out = append(out, reg)
	}
	sort.Slice(out, func(i, j int) bool { return TypeString(out[i].Type) < TypeString(out[j].Type) })
	return out
}

func keyOf(t *pbresource.Type) versionedType {
	return versionedType{t.GetGroup(), t.GetGroupVersion(), t.GetKind()}
}
