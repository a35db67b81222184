// Package lifetime deletes one lifetime of a resource (the one its Uid
// names) the same way against Loom's service and Consul's, for the helpers
// that must never touch a newer resource of the same name: the finalizer
// helpers, upsert's ReplaceStale and the reaper.
package lifetime

import (
	"context"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Delete deletes the resource id names, aimed at its Uid. It succeeds when
// the resource is deleted or marked for deletion, already gone, or when the
// name now belongs to a newer resource (Loom refuses the Delete with
// FailedPrecondition then; Consul accepts it and deletes nothing).
func Delete(ctx context.Context, client pbresource.ResourceServiceClient, id *pbresource.ID) error {
	_, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: id})
	switch status.Code(err) {
	case codes.OK, codes.NotFound:
		return nil
	case codes.FailedPrecondition:
		// Loom's answer to a Uid that names an earlier resource, but also to
		// a fenced write: look before calling it success.
		rsp, readErr := client.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name}})
		if status.Code(readErr) == codes.NotFound || (readErr == nil && rsp.GetResource().GetId().GetUid() != id.GetUid()) {
			return nil
		}
	}
	return err
}
