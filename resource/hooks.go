package resource

import (
	"errors"
	"fmt"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// hooks are a Registration's hooks with T erased. data is always a T.
type hooks interface {
	mutate(res *pbresource.Resource, data proto.Message) (proto.Message, error)
	validate(res *pbresource.Resource, data proto.Message) error
	hasMutate() bool
	authorizeRead(authz Authorizer, id *pbresource.ID, res *pbresource.Resource, decode func() (proto.Message, error)) (bool, error)
	authorizeWrite(authz Authorizer, res *pbresource.Resource, decode func() (proto.Message, error)) (bool, error)
	authorizeList(authz Authorizer, tenancy *pbresource.Tenancy) (bool, error)
}

// erase checks reg and returns it as a Registered.
func (reg Registration[T]) erase() (Registered, error) {
	mt, err := messageType[T](reg.Message)
	if err != nil {
		return Registered{}, fmt.Errorf("registering type %s: %w", TypeString(reg.Type), err)
	}
	out := Registered{Type: reg.Type, Scope: reg.Scope, Message: mt}
	if reg.Mutate != nil || reg.Validate != nil || reg.ACLs != nil {
		out.hooks = typedHooks[T]{reg}
	}
	return out, nil
}

// messageType returns T's message type: mt when given (which must make Ts),
// else the one T names.
func messageType[T proto.Message](mt protoreflect.MessageType) (_ protoreflect.MessageType, err error) {
	if mt != nil {
		if _, ok := mt.New().Interface().(T); !ok {
			var zero T
			return nil, fmt.Errorf("Message makes %T messages, not %T", mt.New().Interface(), zero)
		}
		return mt, nil
	}
	var zero T
	if any(zero) == nil {
		return nil, errors.New("Message is required when the data type is an interface")
	}
	defer func() {
		// A generated message's ProtoReflect works on a nil pointer; other
		// implementations (dynamicpb) may panic.
		if recover() != nil {
			err = fmt.Errorf("cannot tell the message type of %T; set Message", zero)
		}
	}()
	return zero.ProtoReflect().Type(), nil
}

// check validates t before a Registry adds it.
func (t Registered) check() error {
	if err := ValidateType(t.Type); err != nil {
		return fmt.Errorf("registering type %s: %w", TypeString(t.Type), err)
	}
	if t.Message == nil {
		return fmt.Errorf("registering type %s: Message is required", TypeString(t.Type))
	}
	if t.Scope < ScopeCluster || t.Scope > ScopeNamespace {
		return fmt.Errorf("registering type %s: Scope must be ScopeCluster, ScopePartition or ScopeNamespace", TypeString(t.Type))
	}
	return nil
}

// MessageName is the full name of the message the type's Data holds.
func (t Registered) MessageName() protoreflect.FullName { return t.Message.Descriptor().FullName() }

// HasMutate reports whether the type has a Mutate hook.
func (t Registered) HasMutate() bool { return t.hooks != nil && t.hooks.hasMutate() }

// Mutate runs the type's Mutate hook, if any, on res and its decoded data,
// and returns the data: the hook may have replaced it.
func (t Registered) Mutate(res *pbresource.Resource, data proto.Message) (proto.Message, error) {
	if !t.HasMutate() {
		return data, nil
	}
	return t.hooks.mutate(res, data)
}

// Validate runs the type's Validate hook, if any, on res and its decoded
// data.
func (t Registered) Validate(res *pbresource.Resource, data proto.Message) error {
	if t.hooks == nil {
		return nil
	}
	return t.hooks.validate(res, data)
}

// Decode decodes res's Data into a new message of the type's.
func (t Registered) Decode(res *pbresource.Resource) (proto.Message, error) {
	msg := t.Message.New().Interface()
	if err := decodeInto(res, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// AuthorizeRead runs the type's Read ACL hook, or the default check. res is
// the stored resource, or nil; its Data is decoded only if a hook needs it.
func (t Registered) AuthorizeRead(authz Authorizer, id *pbresource.ID, res *pbresource.Resource) error {
	if t.hooks != nil {
		if ok, err := t.hooks.authorizeRead(authz, id, res, func() (proto.Message, error) { return t.Decode(res) }); ok {
			return err
		}
	}
	return allowedOrDenied(authz, AccessRead, id)
}

// AuthorizeWrite runs the type's Write ACL hook, or the default check. data
// is res's Data decoded, or nil to have it decoded if a hook needs it.
func (t Registered) AuthorizeWrite(authz Authorizer, res *pbresource.Resource, data proto.Message) error {
	if t.hooks != nil {
		decode := func() (proto.Message, error) {
			if data != nil {
				return data, nil
			}
			if res.GetData() == nil {
				return nil, nil // Delete of a resource that does not exist
			}
			return t.Decode(res)
		}
		if ok, err := t.hooks.authorizeWrite(authz, res, decode); ok {
			return err
		}
	}
	return allowedOrDenied(authz, AccessWrite, res.GetId())
}

// AuthorizeList runs the type's List ACL hook, or the default check.
func (t Registered) AuthorizeList(authz Authorizer, tenancy *pbresource.Tenancy) error {
	if t.hooks != nil {
		if ok, err := t.hooks.authorizeList(authz, tenancy); ok {
			return err
		}
	}
	return allowedOrDenied(authz, AccessList, &pbresource.ID{Type: t.Type, Tenancy: tenancy})
}

// typedHooks runs a Registration[T]'s hooks on erased arguments.
type typedHooks[T proto.Message] struct{ reg Registration[T] }

func (h typedHooks[T]) hasMutate() bool { return h.reg.Mutate != nil }

func (h typedHooks[T]) mutate(res *pbresource.Resource, data proto.Message) (proto.Message, error) {
	d := &Decoded[T]{Resource: res, Data: data.(T)}
	if err := h.reg.Mutate(d); err != nil {
		return nil, err
	}
	return d.Data, nil
}

func (h typedHooks[T]) validate(res *pbresource.Resource, data proto.Message) error {
	if h.reg.Validate == nil {
		return nil
	}
	return h.reg.Validate(&Decoded[T]{Resource: res, Data: data.(T)})
}

func (h typedHooks[T]) authorizeRead(authz Authorizer, id *pbresource.ID, res *pbresource.Resource, decode func() (proto.Message, error)) (bool, error) {
	if h.reg.ACLs == nil || h.reg.ACLs.Read == nil {
		return false, nil
	}
	if res == nil {
		return true, h.reg.ACLs.Read(authz, id, nil)
	}
	d, err := decoded[T](res, decode)
	if err != nil {
		return true, err
	}
	return true, h.reg.ACLs.Read(authz, id, d)
}

func (h typedHooks[T]) authorizeWrite(authz Authorizer, res *pbresource.Resource, decode func() (proto.Message, error)) (bool, error) {
	if h.reg.ACLs == nil || h.reg.ACLs.Write == nil {
		return false, nil
	}
	d, err := decoded[T](res, decode)
	if err != nil {
		return true, err
	}
	return true, h.reg.ACLs.Write(authz, d)
}

func (h typedHooks[T]) authorizeList(authz Authorizer, tenancy *pbresource.Tenancy) (bool, error) {
	if h.reg.ACLs == nil || h.reg.ACLs.List == nil {
		return false, nil
	}
	return true, h.reg.ACLs.List(authz, tenancy)
}

// decoded pairs res with its data as decode returns it (nil: the zero T).
func decoded[T proto.Message](res *pbresource.Resource, decode func() (proto.Message, error)) (*Decoded[T], error) {
	msg, err := decode()
	if err != nil {
		return nil, fmt.Errorf("decoding the data of %s for its ACL hook: %w", ReferenceString(res.GetId()), err)
	}
	d := &Decoded[T]{Resource: res}
	if msg != nil {
		d.Data = msg.(T)
	}
	return d, nil
}
