package leaderelection

import (
	"time"

	pbleasev1 "github.com/loomrt/loom/proto/pblease/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// LeaseType is loom.v1.Lease, the resource type of leader leases; its data
// is a pbleasev1.Lease. Treat it as read-only.
var LeaseType = &pbresource.Type{Group: "loom", GroupVersion: "v1", Kind: "Lease"}

// maxIdentityLen bounds a holder identity, so a lease record stays small.
const maxIdentityLen = 256

// RegisterTypes adds loom.v1.Lease to r, as every Loom host does. Like
// resource.Register, it returns an error if the type is already registered.
func RegisterTypes(r resource.Registry) error {
	return resource.Register(r, resource.Registration[*pbleasev1.Lease]{
		Type:     LeaseType,
		Scope:    resource.ScopeNamespace,
		Validate: validateLease,
	})
}

// validateLease refuses lease records that no Elector would write.
func validateLease(res *resource.Decoded[*pbleasev1.Lease]) error {
	l := res.Data
	if len(l.GetHolderIdentity()) > maxIdentityLen {
		return resource.NewErrInvalidField("holder_identity", "is longer than %d bytes", maxIdentityLen)
	}
	if d := l.GetLeaseDuration(); d != nil {
		if err := d.CheckValid(); err != nil {
			return resource.NewErrInvalidField("lease_duration", "%v", err)
		}
		if d.AsDuration() < 0 {
			return resource.NewErrInvalidField("lease_duration", "is negative")
		}
		if d.AsDuration() > 24*time.Hour {
			return resource.NewErrInvalidField("lease_duration", "is longer than 24h")
		}
	}
	return nil
}
