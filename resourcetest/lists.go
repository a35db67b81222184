package resourcetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// maxListedInFailure bounds how many resources a failed list wait shows.
const maxListedInFailure = 20

// listOutcome is one evaluation of a check on a list of resources: the
// resources it saw and, when the check did not pass, why.
type listOutcome struct {
	seen    []*pbresource.Resource
	problem string
}

// listFailure formats the message of a failed list wait. It shows at most
// maxListedInFailure resources, one line each.
func listFailure(what, subject, expected string, last listOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resourcetest: %s %s\n", what, subject)
	fmt.Fprintf(&b, "expected: %s\n", expected)
	fmt.Fprintf(&b, "problem:\n%s\n", indent(last.problem))
	b.WriteString(summarizeList(last.seen))
	return b.String()
}

// summarizeList renders resources one line each (ID, version, generation),
// at most maxListedInFailure of them.
func summarizeList(seen []*pbresource.Resource) string {
	if len(seen) == 0 {
		return "observed: no resources"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "observed %d resource(s):", len(seen))
	for i, res := range seen {
		if i == maxListedInFailure {
			fmt.Fprintf(&b, "\n  … and %d more", len(seen)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s version %s generation %s", resource.IDString(res.GetId()), res.GetVersion(), res.GetGeneration())
	}
	return b.String()
}

// waitList runs list until it passes or c's timeout ends, and then fails t
// with the last outcome.
func (c *Client) waitList(t T, what, subject, expected string, list func() listOutcome) []*pbresource.Resource {
	t.Helper()
	start := time.Now()
	deadline := start.Add(c.timeout)
	attempts := 0
	for {
		out := list()
		attempts++
		if out.problem == "" {
			return out.seen
		}
		if !time.Now().Add(c.poll).Before(deadline) {
			out.problem = fmt.Sprintf("gave up after %s (%d checks); the last check said:\n%s",
				time.Since(start).Round(time.Millisecond), attempts, out.problem)
			fatalf(t, "%s", listFailure(what, subject, expected, out))
			return nil
		}
		time.Sleep(c.poll)
	}
}

// sortByID orders resources by their ID's string form, so checks and
// failure messages see them in a stable order.
func sortByID(resources []*pbresource.Resource) {
	sort.Slice(resources, func(i, j int) bool {
		return resource.IDString(resources[i].GetId()) < resource.IDString(resources[j].GetId())
	})
}

// listAll lists every resource of typ's GroupVersion, in every tenancy.
func (c *Client) listAll(typ *pbresource.Type) ([]*pbresource.Resource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rsp, err := c.List(consistent(ctx), &pbresource.ListRequest{
		Type:    typ,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
	})
	if err != nil {
		return nil, err
	}
	sortByID(rsp.Resources)
	return rsp.Resources, nil
}

// WaitForList waits until check passes on the resources of typ (every
// tenancy; only typ's GroupVersion, as List returns them, ordered by ID),
// and returns them. check reports problems on the T it is given, as in
// WaitForResourceState, and gets its own copies of the resources. When the
// wait gives up, t fails with what the last attempt reported and a summary
// of the resources it saw (at most 20, one line each).
func (c *Client) WaitForList(t T, typ *pbresource.Type, check func(T, []*pbresource.Resource)) []*pbresource.Resource {
	t.Helper()
	return c.waitList(t, "WaitForList", resource.TypeString(typ), "the check passes on the resources of the type", func() listOutcome {
		seen, err := c.listAll(typ)
		if err != nil {
			return listOutcome{problem: fmt.Sprintf("listing failed: %v", err)}
		}
		attempt := runAttempt(func(at T) { check(at, cloneAll(seen)) })
		if attempt.hasFailed() {
			return listOutcome{seen: seen, problem: attempt.report()}
		}
		return listOutcome{seen: seen}
	})
}

// WaitForOwned waits until exactly n resources owned by owner exist
// (ListByOwner), counting only resources of types when types are given
// (matched by group and kind, any GroupVersion), and returns them ordered by
// ID. An owner ID without a Uid is completed by reading the owner. When the
// wait gives up, t fails with a summary of the owned resources last seen.
func (c *Client) WaitForOwned(t T, owner *pbresource.ID, n int, types ...*pbresource.Type) []*pbresource.Resource {
	t.Helper()
	expected := fmt.Sprintf("exactly %d owned resource(s)", n)
	if len(types) > 0 {
		names := make([]string, len(types))
		for i, typ := range types {
			names[i] = resource.TypeString(typ)
		}
		expected += " of type " + strings.Join(names, " or ")
	}
	owner = resource.CloneID(owner)
	return c.waitList(t, "WaitForOwned", "owner "+resource.IDString(owner), expected, func() listOutcome {
		if owner.Uid == "" {
			res, err := c.read(owner)
			switch {
			case err != nil:
				return listOutcome{problem: fmt.Sprintf("reading the owner failed: %v", err)}
			case res == nil:
				return listOutcome{problem: "the owner does not exist"}
			}
			owner = res.Id
		}
		seen, err := c.listOwned(owner, types)
		if err != nil {
			return listOutcome{problem: fmt.Sprintf("listing by owner failed: %v", err)}
		}
		if len(seen) != n {
			return listOutcome{seen: seen, problem: fmt.Sprintf("%d owned resource(s), not %d", len(seen), n)}
		}
		return listOutcome{seen: seen}
	})
}

// ownedPageSize is the page size of listOwned's ListByOwner.
const ownedPageSize = 1000

// listOwned lists what owner owns, keeping only types when given.
func (c *Client) listOwned(owner *pbresource.ID, types []*pbresource.Type) ([]*pbresource.Resource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// In pages of ownedPageSize (one reply from a server that does not
	// page); a listing whose version the store no longer has is Aborted,
	// and the wait lists again.
	var all []*pbresource.Resource
	req := &pbresource.ListByOwnerRequest{Owner: owner, PageSize: ownedPageSize}
	for {
		rsp, err := c.ListByOwner(consistent(ctx), req)
		if err != nil {
			return nil, err
		}
		all = append(all, rsp.Resources...)
		if rsp.NextPageToken == "" {
			break
		}
		req.PageToken = rsp.NextPageToken
	}
	out := all
	if len(types) > 0 {
		out = out[:0:0]
		for _, res := range all {
			for _, typ := range types {
				if resource.EqualUnversionedType(res.GetId().GetType(), typ) {
					out = append(out, res)
					break
				}
			}
		}
	}
	sortByID(out)
	return out, nil
}

// cloneAll returns deep copies of resources.
func cloneAll(resources []*pbresource.Resource) []*pbresource.Resource {
	out := make([]*pbresource.Resource, len(resources))
	for i, res := range resources {
		out[i] = resource.Clone(res)
	}
	return out
}
