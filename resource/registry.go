package resource

import (
	"fmt"
	"sort"
	"sync"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// Registration describes one resource type: its identity, its data message,
// where it lives, and the hooks the ResourceService runs on it.
type Registration struct {
	// Type is the group, version and kind. Required.
	Type *pbresource.Type

	// Proto is an instance of the message held in the resource's Data.
	// Required; writes whose Data is another message are rejected.
	Proto proto.Message

	// Scope says which tenancy units the type's resources have. Required.
	Scope Scope

	// Mutate, if set, may change a resource (e.g. fill in defaults or
	// normalise input) before it is validated and stored. It runs on every
	// Write and in MutateAndValidate.
	Mutate func(res *pbresource.Resource) error

	// Validate, if set, checks a resource after Mutate. An error rejects the
	// write with InvalidArgument; wrap it in ErrInvalidField to name the
	// offending field.
	Validate func(res *pbresource.Resource) error

	// ACLs, if set, replaces the default authorization checks for the type.
	ACLs *ACLHooks
}

// Registry holds the known resource types. Implementations are safe for
// concurrent use; registration normally happens at start-up.
type Registry interface {
	// Register adds a type. It returns an error when the registration is
	// invalid or the type is already registered.
	Register(reg Registration) error

	// MustRegister is Register that panics on error: both errors are
	// programming errors that should stop a server at start-up.
	MustRegister(reg Registration)

	// Resolve returns the registration of typ (GroupVersion included).
	Resolve(typ *pbresource.Type) (Registration, bool)

	// Types returns every registration, ordered by type string.
	Types() []Registration
}

type typeKey struct{ group, version, kind string }

// TypeRegistry is the standard Registry.
type TypeRegistry struct {
	mu    sync.RWMutex
	types map[typeKey]Registration
}

// NewRegistry returns an empty registry.
func NewRegistry() *TypeRegistry {
	return &TypeRegistry{types: make(map[typeKey]Registration)}
}

// MustRegister implements Registry.
func (r *TypeRegistry) MustRegister(reg Registration) {
	if err := r.Register(reg); err != nil {
		panic(err)
	}
}

// Register implements Registry.
func (r *TypeRegistry) Register(reg Registration) error {
	if err := ValidateType(reg.Type); err != nil {
		return fmt.Errorf("registering type %s: %w", TypeString(reg.Type), err)
	}
	if reg.Proto == nil {
		return fmt.Errorf("registering type %s: Proto is required", TypeString(reg.Type))
	}
	if reg.Scope < ScopeCluster || reg.Scope > ScopeNamespace {
		return fmt.Errorf("registering type %s: Scope must be ScopeCluster, ScopePartition or ScopeNamespace", TypeString(reg.Type))
	}
	key := keyOf(reg.Type)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.types[key]; ok {
		return fmt.Errorf("registering type %s: already registered", TypeString(reg.Type))
	}
	for k, other := range r.types {
		if k.group == key.group && k.kind == key.kind && other.Scope != reg.Scope {
			return fmt.Errorf("registering type %s: scope %s differs from %s's scope %s; every version of a type must share its scope",
				TypeString(reg.Type), reg.Scope, TypeString(other.Type), other.Scope)
		}
	}
	reg.Type = cloneType(reg.Type)
	r.types[key] = reg
	return nil
}

// Resolve implements Registry.
func (r *TypeRegistry) Resolve(typ *pbresource.Type) (Registration, bool) {
	if typ == nil {
		return Registration{}, false
	}
	r.mu.RLock()
	reg, ok := r.types[keyOf(typ)]
	r.mu.RUnlock()
	return reg, ok
}

// Types implements Registry.
func (r *TypeRegistry) Types() []Registration {
	r.mu.RLock()
	out := make([]Registration, 0, len(r.types))
	for _, reg := range r.types {
		out = append(out, reg)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return TypeString(out[i].Type) < TypeString(out[j].Type) })
	return out
}

func keyOf(t *pbresource.Type) typeKey {
	return typeKey{t.GetGroup(), t.GetGroupVersion(), t.GetKind()}
}
