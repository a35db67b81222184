package history

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// The bounds of one page of revisions (ListRevisions, ListTrash): every
// response is bounded, whatever the history and trash bounds are.
const (
	// DefaultPageSize is the page size of a request that gives none.
	DefaultPageSize = 100

	// MaxPageSize is the largest page_size a request may ask for.
	MaxPageSize = 1000

	// MaxPageBytes is the size of the revisions past which a page ends
	// early (with a next_page_token): under gRPC's default 4 MiB message
	// limit of clients, with a resource of the server's default 1 MiB
	// limit after it.
	MaxPageBytes = 3 << 20
)

// page returns one page of revisions from list, leaving out those the
// caller may not read, and the token of the next one (empty at the end).
// The token is the version of the last revision looked at: the next page
// starts at the newest revision older than it.
func (s *Service) page(size uint32, token string, authz resource.Authorizer, reg resource.Registered,
	list func(storage.RevisionPageRequest) (storage.RevisionPage, error),
) ([]*pbhistoryv1.Revision, string, error) {
	if size > MaxPageSize {
		return nil, "", status.Errorf(codes.InvalidArgument, "page_size: %d is above the maximum of %d", size, MaxPageSize)
	}
	if token != "" {
		if err := checkVersion("page_token", token); err != nil {
			return nil, "", err
		}
	}
	if size == 0 {
		size = DefaultPageSize
	}
	var (
		out   []*pbhistoryv1.Revision
		bytes int
		preq  = storage.RevisionPageRequest{Before: token}
	)
	for {
		preq.Limit = int(size) - len(out)
		page, err := list(preq)
		if err != nil {
			return nil, "", server.StorageStatus(err)
		}
		for _, rev := range page.Revisions {
			if err := s.authorizeRevision(authz, reg, rev); err != nil {
				if server.IsDenied(err) {
					preq.Before = rev.Version
					continue
				}
				return nil, "", server.ACLStatus(err)
			}
			r := revisionProto(rev)
			n := proto.Size(r)
			if len(out) > 0 && bytes+n > MaxPageBytes {
				return out, out[len(out)-1].Version, nil
			}
			bytes += n
			out = append(out, r)
			preq.Before = rev.Version
		}
		if page.Next == "" {
			return out, "", nil
		}
		if len(out) == int(size) {
			return out, page.Next, nil
		}
		preq.Before = page.Next
	}
}
