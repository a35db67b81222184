package bulk

import (
	"context"
	"errors"
	"io"

	"google.golang.org/protobuf/proto"

	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// The client side, for the CLI and tests: an import sent in messages of at
// most RequestBytes (a larger resource alone in its message; the server's
// largest message, -max-recv-msg-bytes, is above its largest resource),
// and an export read to its end.

// RequestBytes is how many bytes of resources SendImport puts in one
// ImportRequest.
const RequestBytes = 512 << 10

// SendImport imports resources with opts through client, and returns the
// server's response.
func SendImport(ctx context.Context, client pbbulkv1.BulkServiceClient, opts *pbbulkv1.ImportOptions, resources []*pbresource.Resource) (*pbbulkv1.ImportResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Import(ctx)
	if err != nil {
		return nil, err
	}
	req := &pbbulkv1.ImportRequest{Options: opts}
	size := 0
	for _, res := range resources {
		n := proto.Size(res)
		if len(req.Resources) > 0 && size+n > RequestBytes {
			if err := stream.Send(req); err != nil {
				return stream.CloseAndRecv() // io.EOF: the server's error
			}
			req, size = &pbbulkv1.ImportRequest{}, 0
		}
		req.Resources = append(req.Resources, res)
		size += n
	}
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return stream.CloseAndRecv()
}

// ReceiveExport runs req through client and returns every resource
// exported, in the order sent, and the version the export is consistent
// at.
func ReceiveExport(ctx context.Context, client pbbulkv1.BulkServiceClient, req *pbbulkv1.ExportRequest) ([]*pbresource.Resource, string, error) {
	stream, err := client.Export(ctx, req)
	if err != nil {
		return nil, "", err
	}
	var (
		out     []*pbresource.Resource
		version string
	)
	for {
		rsp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, version, nil
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, rsp.Resources...)
		version = rsp.Version
	}
}
