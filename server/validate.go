package server

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// maxStatusKeyLength bounds WriteStatus keys; they are controller names, so
// this is generous.
const maxStatusKeyLength = 256

// invalidField returns an InvalidArgument status naming field.
func invalidField(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, resource.NewErrInvalidField(field, format, args...).Error())
}

// invalidArgument wraps a validation error (normally a
// resource.ErrInvalidField, which names its field) as InvalidArgument.
func invalidArgument(err error) error {
	return status.Error(codes.InvalidArgument, err.Error())
}

// hookError maps the error of a Mutate or Validate hook to a status. A hook
// that returns a gRPC status chooses its code; any other error rejects the
// request as InvalidArgument with the hook's message (which, for a
// resource.ErrInvalidField, names the field).
func hookError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// resolveType returns the registration of t, or InvalidArgument naming path
// when t is malformed or not registered. Registered types were validated at
// registration, so the (regexp-based) format check only runs for unknown
// types, to explain the rejection.
func (s *Server) resolveType(path string, t *pbresource.Type) (resource.Registered, error) {
	if reg, ok := s.registry.Resolve(t); ok {
		return reg, nil
	}
	return resource.Registered{}, unresolvedType(path, t)
}

// unresolvedType explains why resolveType found no registration for t.
func unresolvedType(path string, t *pbresource.Type) error {
	if err := resource.ValidateTypeField(path, t); err != nil {
		return invalidArgument(err)
	}
	return invalidField(path, "resource type %s is not registered", resource.Quote(resource.TypeString(t)))
}

// checkID validates id (found at path in the request) for a request about
// one resource: registered type, valid name, tenancy fitting the type's
// scope, and a well-formed Uid when one is given. It returns the
// registration and id with its tenancy normalized (defaults filled in): id
// itself when it is normalized already, else a copy. id is never changed.
func (s *Server) checkID(path string, id *pbresource.ID) (resource.Registered, *pbresource.ID, error) {
	if id == nil {
		return resource.Registered{}, nil, invalidArgument(resource.ErrInvalidField{Name: path, Wrapped: resource.ErrMissing})
	}
	reg, ok := s.registry.Resolve(id.Type)
	if !ok { // as resolveType, building the field's path only for the error
		return reg, nil, unresolvedType(path+".type", id.Type)
	}
	if err := resource.ValidateName(id.Name); err != nil {
		return reg, nil, invalidArgument(resource.ErrInvalidField{Name: path + ".name", Wrapped: err})
	}
	if id.Uid != "" && !resource.IsULID(id.Uid) {
		return reg, nil, invalidField(path+".uid", "%s is not a ULID", resource.Quote(id.Uid))
	}
	if isNormalized(reg.Scope, id.Tenancy) {
		return reg, id, nil
	}
	t, err := resource.NormalizeTenancy(path+".tenancy", reg.Scope, id.Tenancy, false)
	if err != nil {
		return reg, nil, invalidArgument(err)
	}
	return reg, &pbresource.ID{Type: id.Type, Tenancy: t, Name: id.Name, Uid: id.Uid}, nil
}

// withUid returns id with the given Uid: id itself when it has it, else a
// shallow copy (sharing the type and tenancy).
func withUid(id *pbresource.ID, uid string) *pbresource.ID {
	return withUidIn(id, uid, nil)
}

// withUidIn is withUid making the copy in buf, unless buf is nil. buf may
// be id itself, a copy an earlier attempt of a read-modify-write made.
func withUidIn(id *pbresource.ID, uid string, buf *pbresource.ID) *pbresource.ID {
	if id.Uid == uid {
		return id
	}
	if buf == nil {
		return &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name, Uid: uid}
	}
	buf.Type, buf.Tenancy, buf.Name, buf.Uid = id.Type, id.Tenancy, id.Name, uid
	return buf
}

// isNormalized is a cheap pre-check for the common case of a tenancy that
// NormalizeTenancy would return unchanged.
func isNormalized(scope resource.Scope, t *pbresource.Tenancy) bool {
	if t == nil {
		return false
	}
	switch scope {
	case resource.ScopeCluster:
		return t.Partition == "" && t.Namespace == ""
	case resource.ScopePartition:
		return t.Namespace == "" && resource.ValidateName(t.Partition) == nil
	case resource.ScopeNamespace:
		return resource.ValidateName(t.Partition) == nil && resource.ValidateName(t.Namespace) == nil
	}
	return false
}

// checkOwner validates an owner reference: registered type, valid name,
// tenancy for the owner type's scope and a well-formed Uid when given. It
// returns the owner with its tenancy normalized (see checkID). Existence is
// checked by the write itself.
func (s *Server) checkOwner(owner *pbresource.ID) (*pbresource.ID, error) {
	_, out, err := s.checkID("owner", owner)
	return out, err
}

// anyPrefix is the conventional, canonical start of an Any's type URL.
const anyPrefix = "type.googleapis.com/"

// checkData checks that data holds the registration's message and decodes
// it. It returns data, or a copy with the type URL in its canonical form
// when data names the right message otherwise (a bare "foo.v1.Bar", another
// host), so what is stored is canonical; and the decoded message.
func checkData(reg resource.Registered, data *anypb.Any) (*anypb.Any, proto.Message, error) {
	if data == nil {
		return nil, nil, invalidArgument(resource.ErrInvalidField{Name: "data", Wrapped: resource.ErrMissing})
	}
	want := reg.MessageName()
	if got := data.MessageName(); got != want {
		return nil, nil, invalidField("data", "holds a %s message (type URL %s), but resource type %s holds %q",
			resource.Quote(string(got)), resource.Quote(data.TypeUrl), resource.TypeString(reg.Type), want)
	}
	if !isCanonicalURL(data.TypeUrl, want) {
		data = &anypb.Any{TypeUrl: anyPrefix + string(want), Value: data.Value}
	}
	msg := reg.Message.New().Interface()
	// Merge: msg is new, so merging is unmarshalling, without a Reset.
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(data.Value, msg); err != nil {
		return nil, nil, invalidArgument(resource.ErrInvalidField{Name: "data", Wrapped: resource.NewErrDataParse(msg, err)})
	}
	return data, msg, nil
}

// isCanonicalURL reports whether url is anyPrefix followed by name,
// without building that string.
func isCanonicalURL(url string, name protoreflect.FullName) bool {
	return len(url) == len(anyPrefix)+len(name) && strings.HasPrefix(url, anyPrefix) && url[len(anyPrefix):] == string(name)
}

// checkStatusKey validates a WriteStatus key: required, printable, without
// spaces, of a sane length.
func checkStatusKey(key string) error {
	if key == "" {
		return invalidArgument(resource.ErrInvalidField{Name: "key", Wrapped: resource.ErrMissing})
	}
	if len(key) > maxStatusKeyLength {
		return invalidField("key", "is %d bytes long; the limit is %d", len(key), maxStatusKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f {
			return checkStatusKeyRunes(key) // not printable ASCII: look closer
		}
	}
	return nil
}

// checkStatusKeyRunes is checkStatusKey's check of the characters, for
// keys that are not all printable ASCII.
func checkStatusKeyRunes(key string) error {
	for _, r := range key {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return invalidField("key", "%s must be printable and contain no spaces", resource.Quote(key))
		}
	}
	return nil
}

// checkStatus validates a status given to WriteStatus.
func checkStatus(st *pbresource.Status) error {
	if st == nil {
		return invalidArgument(resource.ErrInvalidField{Name: "status", Wrapped: resource.ErrMissing})
	}
	if st.ObservedGeneration == "" {
		return invalidArgument(resource.ErrInvalidField{Name: "status.observed_generation", Wrapped: resource.ErrMissing})
	}
	if !resource.IsULID(st.ObservedGeneration) {
		return invalidField("status.observed_generation", "%s is not a ULID", resource.Quote(st.ObservedGeneration))
	}
	for i, c := range st.Conditions {
		// The path is built only for an error: this runs on every status write.
		path := func() string { return fmt.Sprintf("status.conditions[%d]", i) }
		if c == nil {
			return invalidArgument(resource.ErrInvalidField{Name: path(), Wrapped: resource.ErrMissing})
		}
		if c.Type == "" {
			return invalidArgument(resource.ErrInvalidField{Name: path() + ".type", Wrapped: resource.ErrMissing})
		}
		if c.Resource != nil {
			if err := checkReference(path()+".resource", c.Resource); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkReference validates a condition's reference. The referenced type need
// not be registered here (it may belong to another server), but its type,
// name and tenancy units must be well-formed.
func checkReference(path string, ref *pbresource.Reference) error {
	if err := resource.ValidateTypeField(path+".type", ref.Type); err != nil {
		return invalidArgument(err)
	}
	if err := resource.ValidateName(ref.Name); err != nil {
		return invalidArgument(resource.ErrInvalidField{Name: path + ".name", Wrapped: err})
	}
	if p := ref.GetTenancy().GetPartition(); p != "" {
		if err := resource.ValidateName(p); err != nil {
			return invalidArgument(resource.ErrInvalidField{Name: path + ".tenancy.partition", Wrapped: err})
		}
	}
	if n := ref.GetTenancy().GetNamespace(); n != "" {
		if err := resource.ValidateName(n); err != nil {
			return invalidArgument(resource.ErrInvalidField{Name: path + ".tenancy.namespace", Wrapped: err})
		}
	}
	return nil
}

// errMutatedID is returned when a Mutate hook changes the resource's ID,
// which the service cannot allow: the ID was validated and authorized.
var errMutatedID = errors.New("the type's Mutate hook changed the resource's id")
