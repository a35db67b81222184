package resource

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// MaxNameLength is the longest resource, partition or namespace name allowed.
const MaxNameLength = 63

var (
	groupRE        = regexp.MustCompile(`^[a-z][a-z0-9_]+$`)
	groupVersionRE = regexp.MustCompile(`^v([a-z0-9]+)?[0-9]$`)
	kindRE         = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)
)

// ErrInvalidField reports that one field of a request or resource is wrong.
// Name is the field's path (e.g. "id.name", "baz"); Wrapped says why.
type ErrInvalidField struct {
	Name    string
	Wrapped error
}

// Error implements error.
func (e ErrInvalidField) Error() string {
	return fmt.Sprintf("invalid %q field: %v", e.Name, e.Wrapped)
}

// Unwrap returns the reason.
func (e ErrInvalidField) Unwrap() error { return e.Wrapped }

// NewErrInvalidField is shorthand for ErrInvalidField{name, fmt.Errorf(...)}.
func NewErrInvalidField(name, format string, args ...any) error {
	return ErrInvalidField{Name: name, Wrapped: fmt.Errorf(format, args...)}
}

// Errors a validation hook can wrap in ErrInvalidField.
var (
	// ErrMissing means a required field is empty.
	ErrMissing = errors.New("field is required")

	// ErrEmpty is an alias of ErrMissing kept for hooks that prefer the word.
	ErrEmpty = ErrMissing
)

// ErrDataParse reports that a resource's Data could not be decoded as the
// type's registered message.
type ErrDataParse struct {
	TypeName string
	Wrapped  error
}

// NewErrDataParse builds an ErrDataParse for the message type of msg.
func NewErrDataParse(msg proto.Message, err error) ErrDataParse {
	return ErrDataParse{TypeName: string(msg.ProtoReflect().Descriptor().FullName()), Wrapped: err}
}

// Error implements error.
func (e ErrDataParse) Error() string {
	return fmt.Sprintf("error parsing resource data as type %q: %v", e.TypeName, e.Wrapped)
}

// Unwrap returns the decoding error.
func (e ErrDataParse) Unwrap() error { return e.Wrapped }

// ValidateName checks that name is a lowercase DNS label: letters, digits and
// '-', starting and ending with a letter or digit, at most 63 characters.
func ValidateName(name string) error {
	if name == "" {
		return ErrMissing
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("%s is longer than %d characters", Quote(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("%s is not a valid name: use lowercase letters, digits and '-', starting and ending with a letter or digit", Quote(name))
		}
	}
	return nil
}

// ValidateType checks the group, group version and kind of t, naming the
// offending field in the error ("type.group", ...).
func ValidateType(t *pbresource.Type) error {
	return validateType("type", t)
}

func validateType(path string, t *pbresource.Type) error {
	if t == nil {
		return ErrInvalidField{Name: path, Wrapped: ErrMissing}
	}
	if !groupRE.MatchString(t.Group) {
		return NewErrInvalidField(path+".group", "%s must match %s", Quote(t.Group), groupRE)
	}
	if !groupVersionRE.MatchString(t.GroupVersion) {
		return NewErrInvalidField(path+".group_version", "%s must match %s", Quote(t.GroupVersion), groupVersionRE)
	}
	if !kindRE.MatchString(t.Kind) {
		return NewErrInvalidField(path+".kind", "%s must match %s", Quote(t.Kind), kindRE)
	}
	return nil
}

// ValidateTypeField is ValidateType with a caller-chosen field path, e.g.
// "id.type" or "owner.type".
func ValidateTypeField(path string, t *pbresource.Type) error {
	return validateType(path, t)
}
