package resource

import (
	"fmt"

	"github.com/loomrt/loom/proto/pbresource"
)

// Scope says which tenancy units a type's resources live in.
type Scope int

const (
	// ScopeUndefined is the zero Scope; registering a type with it fails.
	ScopeUndefined Scope = iota
	// ScopeCluster resources have neither partition nor namespace.
	ScopeCluster
	// ScopePartition resources live in a partition and have no namespace.
	ScopePartition
	// ScopeNamespace resources live in a namespace of a partition.
	ScopeNamespace
)

// String names the scope.
func (s Scope) String() string {
	switch s {
	case ScopeCluster:
		return "cluster"
	case ScopePartition:
		return "partition"
	case ScopeNamespace:
		return "namespace"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// DefaultPartition and DefaultNamespace fill tenancy units left empty.
const (
	DefaultPartition = "default"
	DefaultNamespace = "default"
)

// Wildcard, in a tenancy unit of List or WatchList, matches every value.
const Wildcard = "*"

// NormalizeTenancy checks tenancy against scope and returns it with empty
// units filled with their defaults. Units the scope does not have must be
// empty. With allowWildcard (List and WatchList), "*" matches every value of
// a unit and is also accepted, harmlessly, for units the scope lacks. Errors
// name the field under path (e.g. "id.tenancy.namespace"). The input is never
// modified; the result is a new message.
func NormalizeTenancy(path string, scope Scope, t *pbresource.Tenancy, allowWildcard bool) (*pbresource.Tenancy, error) {
	p, n := t.GetPartition(), t.GetNamespace()
	check := func(field, v string) error {
		if allowWildcard && v == Wildcard {
			return nil
		}
		if err := ValidateName(v); err != nil {
			return ErrInvalidField{Name: path + "." + field, Wrapped: err}
		}
		return nil
	}
	absent := func(field, v string) error {
		if v == "" || (allowWildcard && v == Wildcard) {
			return nil
		}
		return NewErrInvalidField(path+"."+field, "must be empty: %s-scoped types have no %s (got %s)", scope, field, Quote(v))
	}
	switch scope {
	case ScopeCluster:
		if err := absent("partition", p); err != nil {
			return nil, err
		}
		if err := absent("namespace", n); err != nil {
			return nil, err
		}
		return &pbresource.Tenancy{}, nil
	case ScopePartition:
		if p == "" {
			p = DefaultPartition
		}
		if err := check("partition", p); err != nil {
			return nil, err
		}
		if err := absent("namespace", n); err != nil {
			return nil, err
		}
		return &pbresource.Tenancy{Partition: p}, nil
	case ScopeNamespace:
		if p == "" {
			p = DefaultPartition
		}
		if n == "" {
			n = DefaultNamespace
		}
		if err := check("partition", p); err != nil {
			return nil, err
		}
		if err := check("namespace", n); err != nil {
			return nil, err
		}
		return &pbresource.Tenancy{Partition: p, Namespace: n}, nil
	}
	return nil, fmt.Errorf("unknown scope %v", scope)
}
