package server

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

func ownerList(owner *pbresource.ID, size uint32, token string) *pbresource.ListByOwnerRequest {
	return &pbresource.ListByOwnerRequest{Owner: owner, PageSize: size, PageToken: token}
}

// listOwnerPages pages through req's listing, checking that every page has
// the same version and that every page but the last is full. It returns
// the resources' names (type/name) and the version.
func listOwnerPages(t *testing.T, client pbresource.ResourceServiceClient, req *pbresource.ListByOwnerRequest) ([]string, string) {
	t.Helper()
	return walkPages(t, int(req.PageSize), func(token string) ([]*pbresource.Resource, string, string) {
		req.PageToken = token
		rsp, err := client.ListByOwner(testCtx(t), req)
		require.NoError(t, err)
		return rsp.Resources, rsp.Version, rsp.NextPageToken
	}, func(id *pbresource.ID) string { return id.Type.Kind + "/" + id.Name })
}

// ownedChildren writes, owned by owner, bars (some the readFilter ACL
// hides) and quxes, and returns how many the ACL lets through.
func ownedChildren(t *testing.T, env *testEnv, owner *pbresource.ID) int {
	readable := 0
	for i := range 17 {
		b := bar(t, fmt.Sprintf("b%02d", i), "x")
		b.Owner = owner
		env.write(t, b)
		readable++
		if i%3 == 0 {
			s := bar(t, fmt.Sprintf("secret-%02d", i), "x")
			s.Owner = owner
			env.write(t, s)
			q := qux(t, fmt.Sprintf("q%02d", i))
			q.Owner = owner
			env.write(t, q)
			readable++
		}
	}
	env.write(t, bar(t, "not-owned", "x"))
	return readable
}

// TestListByOwnerPages: the pages of an owner's resources, of two types,
// hold what one ListByOwner holds after the ACL filter, full up to
// page_size; an unpaged ListByOwner reports its version.
func TestListByOwnerPages(t *testing.T) {
	env := newEnv(t, withACL(func(context.Context) (resource.Authorizer, error) { return readFilter, nil }))
	owner := env.write(t, zip(t, "owner"))
	readable := ownedChildren(t, env, owner.Id)

	whole, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 0, ""))
	require.NoError(t, err)
	require.Len(t, whole.Resources, readable)
	require.Empty(t, whole.NextPageToken)
	latest := env.write(t, zip(t, "later"))
	require.Equal(t, strconv.Itoa(mustAtoi(t, latest.Version)-1), whole.Version, "an unpaged ListByOwner reports the store's version")

	var want []string
	for _, r := range whole.Resources {
		want = append(want, r.Id.Type.Kind+"/"+r.Id.Name)
	}
	for _, size := range []uint32{1, 4, uint32(readable), uint32(readable) + 1, MaxListPageSize} {
		got, version := listOwnerPages(t, env.client, ownerList(owner.Id, size, ""))
		require.Equal(t, want, got, "page size %d", size)
		require.Equal(t, latest.Version, version)
	}
}

// ownerUnpagedBackend hides every optional capability of its backend, the
// storage.OwnerPagedLister among them.
type ownerUnpagedBackend struct{ storage.Backend }

// TestListByOwnerPages_Unpaged: a backend that cannot page an owner's
// resources answers a paged ListByOwner in one page, with no token and no
// version, as a Consul server does.
func TestListByOwnerPages_Unpaged(t *testing.T) {
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { return ownerUnpagedBackend{b} }))
	owner := env.write(t, zip(t, "owner"))
	ownedChildren(t, env, owner.Id)
	rsp, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 2, ""))
	require.NoError(t, err)
	require.Len(t, rsp.Resources, 17+2*6)
	require.Empty(t, rsp.NextPageToken)
	require.Empty(t, rsp.Version)
}

// TestListByOwnerPages_BadRequests: page sizes above the maximum, tokens
// that are malformed, a List's token, and tokens issued for another owner
// (another name, or another lifetime of the same name) are
// InvalidArgument, naming the field.
func TestListByOwnerPages_BadRequests(t *testing.T) {
	env := newEnv(t)
	owner := env.write(t, zip(t, "owner"))
	other := env.write(t, zip(t, "other"))
	ownedChildren(t, env, owner.Id)

	_, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, MaxListPageSize+1, ""))
	requireCode(t, err, codes.InvalidArgument, "page_size")

	first, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 2, ""))
	require.NoError(t, err)
	tok := first.NextPageToken
	require.NotEmpty(t, tok)
	listed, err := env.client.List(testCtx(t), barList(2, ""))
	require.NoError(t, err)
	require.NotEmpty(t, listed.NextPageToken)

	for name, bad := range map[string]string{
		"not base64":   "!!!",
		"truncated":    tok[:len(tok)-3],
		"extended":     tok + "AAAA",
		"empty data":   "Ag",
		"too long":     string(make([]byte, 4096)),
		"a List token": listed.NextPageToken,
	} {
		_, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 2, bad))
		requireCode(t, err, codes.InvalidArgument, "page_token")
		_ = name
	}
	_, err = env.client.List(testCtx(t), barList(2, tok))
	requireCode(t, err, codes.InvalidArgument, "page_token")

	_, err = env.client.ListByOwner(testCtx(t), ownerList(other.Id, 2, tok))
	requireCode(t, err, codes.InvalidArgument, "page_token", "another owner")
	require.NoError(t, env.delete(t, owner.Id, ""))
	reborn := env.write(t, zip(t, "owner"))
	_, err = env.client.ListByOwner(testCtx(t), ownerList(reborn.Id, 2, tok))
	requireCode(t, err, codes.InvalidArgument, "page_token", "another owner")

	// The same owner with another page size continues the listing.
	rest, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 0, tok))
	require.NoError(t, err)
	require.Len(t, rest.Resources, 17+2*6-2)
	require.Empty(t, rest.NextPageToken)
	require.Equal(t, first.Version, rest.Version)
}

// TestListByOwnerPages_TooOld: a token whose version has left the event
// log is Aborted, telling the client to list again.
func TestListByOwnerPages_TooOld(t *testing.T) {
	env := newEnv(t, withWatchBuffer(16))
	owner := env.write(t, zip(t, "owner"))
	for i := range 5 {
		b := bar(t, fmt.Sprintf("b%d", i), "x")
		b.Owner = owner.Id
		env.write(t, b)
	}
	first, err := env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 2, ""))
	require.NoError(t, err)
	for i := range 40 {
		env.write(t, bar(t, "unowned", strconv.Itoa(i)))
	}
	_, err = env.client.ListByOwner(testCtx(t), ownerList(owner.Id, 2, first.NextPageToken))
	requireCode(t, err, codes.Aborted, "list again")
}
