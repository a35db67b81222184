package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"slices"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

const wildcard = "*"

// Policy is a parsed ACL file: the tokens it names and what each may do.
// It is immutable and safe for concurrent use.
type Policy struct {
	bySecret map[[sha256.Size]byte]*token
}

type token struct {
	name         string
	secretHash   [sha256.Size]byte
	rules        []rule
	capabilities uint64     // bit c set: resource.Capability c granted
	authz        Authorizer // handed out by Token, made once
}

type rule struct {
	group, version, kind string
	partition, namespace string
	read, list, write    bool
}

// Token returns the Authorizer of the token whose secret is secret, or
// false when the policy names no such token. The secret is hashed and the
// hashes compared in constant time, so how long a lookup takes says nothing
// about the secrets the policy holds.
func (p *Policy) Token(secret string) (*Authorizer, bool) {
	h := sha256.Sum256([]byte(secret))
	t, ok := p.bySecret[h]
	if !ok || subtle.ConstantTimeCompare(t.secretHash[:], h[:]) != 1 {
		return nil, false
	}
	return &t.authz, true
}

// Len returns how many tokens the policy names.
func (p *Policy) Len() int { return len(p.bySecret) }

// Authorizer is what one token may do: a resource.Authorizer.
type Authorizer struct{ t *token }

var _ resource.CapabilityAuthorizer = (*Authorizer)(nil)

// Name is the token's name, for logs and audit lines (never its secret).
func (a *Authorizer) Name() string { return a.t.name }

// Equal reports whether other is an *Authorizer with the same rules, in
// the same order, and the same capabilities: one that allows exactly what
// a does, whatever its name.
func (a *Authorizer) Equal(other resource.Authorizer) bool {
	o, ok := other.(*Authorizer)
	return ok && slices.Equal(a.t.rules, o.t.rules) && a.t.capabilities == o.t.capabilities
}

// Allowed implements resource.Authorizer. For AccessList, id names the type
// and the tenancy listed, where "*" stands for every partition or
// namespace; it is allowed when some rule grants listing anywhere in it
// (the server then filters what is listed by AccessRead, item by item).
func (a *Authorizer) Allowed(access resource.Access, id *pbresource.ID) bool {
	for i := range a.t.rules {
		r := &a.t.rules[i]
		if !r.grants(access) || !r.matchesType(id.GetType()) {
			continue
		}
		ten := id.GetTenancy()
		if access == resource.AccessList {
			if overlaps(r.partition, ten.GetPartition()) && overlaps(r.namespace, ten.GetNamespace()) {
				return true
			}
			continue
		}
		if matches(r.partition, ten.GetPartition()) && matches(r.namespace, ten.GetNamespace()) {
			return true
		}
	}
	return false
}

// AllowedCapability implements resource.CapabilityAuthorizer: whether a
// rule of the token names c.
func (a *Authorizer) AllowedCapability(c resource.Capability) bool {
	return c > 0 && c < 64 && a.t.capabilities&(1<<c) != 0
}

func (r *rule) grants(access resource.Access) bool {
	switch access {
	case resource.AccessRead:
		return r.read
	case resource.AccessList:
		return r.list
	case resource.AccessWrite:
		return r.write
	}
	return false
}

func (r *rule) matchesType(t *pbresource.Type) bool {
	return matchPart(r.group, t.GetGroup()) && matchPart(r.version, t.GetGroupVersion()) && matchPart(r.kind, t.GetKind())
}

func matchPart(pattern, v string) bool { return pattern == wildcard || pattern == v }

// matches reports whether a rule's unit covers the unit of one resource.
// An empty unit (one the type does not have) is covered only by "*".
func matches(pattern, v string) bool { return pattern == wildcard || (v != "" && pattern == v) }

// overlaps reports whether a rule's unit covers some of what a List of v
// ("*": every one) returns.
func overlaps(pattern, v string) bool { return v == wildcard || matches(pattern, v) }
