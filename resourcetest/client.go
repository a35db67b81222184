package resourcetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Default timing of a Client's waits.
const (
	DefaultWaitTimeout  = 5 * time.Second
	DefaultPollInterval = 10 * time.Millisecond
)

// Client wraps a ResourceService client with checks for tests. Require*
// methods check the current state once; WaitFor* methods poll until the
// state is reached or the wait times out. Either way a failure names the
// resource, says what was expected, and shows the resource as last read.
//
// Reads ask the service for a consistent (linearizable) result, so a check
// right after a write sees that write. The embedded client is available for
// everything else.
type Client struct {
	pbresource.ResourceServiceClient

	timeout time.Duration
	poll    time.Duration
}

// NewClient wraps client.
func NewClient(client pbresource.ResourceServiceClient) *Client {
	if c, ok := client.(*Client); ok {
		return c
	}
	return &Client{ResourceServiceClient: client, timeout: DefaultWaitTimeout, poll: DefaultPollInterval}
}

// WithTimeout returns a copy of c whose waits give up after d.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.timeout = d
	return &cp
}

// WithPollInterval returns a copy of c whose waits re-check every d.
func (c *Client) WithPollInterval(d time.Duration) *Client {
	cp := *c
	cp.poll = d
	return &cp
}

// consistent asks the service for a linearizable read.
func consistent(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
}

// read reads id consistently; a missing resource is (nil, nil).
func (c *Client) read(id *pbresource.ID) (*pbresource.Resource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rsp, err := c.Read(consistent(ctx), &pbresource.ReadRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rsp.Resource, nil
}

// outcome is one evaluation of a check: the resource it saw (nil if none)
// and, when the check did not pass, why.
type outcome struct {
	res     *pbresource.Resource
	problem string
}

// check evaluates a condition on the stored state of one resource.
type check func() outcome

// failure formats the message of a failed check or wait.
func failure(what string, id *pbresource.ID, expected string, last outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resourcetest: %s %s\n", what, resource.IDString(id))
	fmt.Fprintf(&b, "expected: %s\n", expected)
	fmt.Fprintf(&b, "problem:\n%s\n", indent(last.problem))
	if last.res == nil {
		b.WriteString("observed: no such resource")
	} else {
		fmt.Fprintf(&b, "observed resource:\n%s", indent(prettyResource(last.res)))
	}
	return b.String()
}

// require runs ck once and fails t if it does not pass.
func (c *Client) require(t T, what string, id *pbresource.ID, expected string, ck check) *pbresource.Resource {
	t.Helper()
	out := ck()
	if out.problem != "" {
		fatalf(t, "%s", failure(what, id, expected, out))
	}
	return out.res
}

// wait runs ck until it passes or c's timeout ends, and then fails t with
// the last outcome.
func (c *Client) wait(t T, what string, id *pbresource.ID, expected string, ck check) *pbresource.Resource {
	t.Helper()
	start := time.Now()
	deadline := start.Add(c.timeout)
	attempts := 0
	for {
		out := ck()
		attempts++
		if out.problem == "" {
			return out.res
		}
		if !time.Now().Add(c.poll).Before(deadline) {
			out.problem = fmt.Sprintf("gave up after %s (%d checks); the last check said:\n%s",
				time.Since(start).Round(time.Millisecond), attempts, out.problem)
			fatalf(t, "%s", failure(what, id, expected, out))
			return nil
		}
		time.Sleep(c.poll)
	}
}

// existsCheck passes when the resource exists, and then hands it to more
// for a further verdict ("" passes).
func (c *Client) existsCheck(id *pbresource.ID, more func(res *pbresource.Resource) string) check {
	return func() outcome {
		res, err := c.read(id)
		if err != nil {
			return outcome{problem: fmt.Sprintf("reading it failed: %v", err)}
		}
		if res == nil {
			return outcome{problem: "it does not exist"}
		}
		if more == nil {
			return outcome{res: res}
		}
		return outcome{res: res, problem: more(res)}
	}
}

// RequireResourceExists fails t unless the resource exists, and returns it.
func (c *Client) RequireResourceExists(t T, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	return c.require(t, "RequireResourceExists", id, "the resource exists", c.existsCheck(id, nil))
}

// WaitForResourceExists waits until the resource exists, and returns it.
func (c *Client) WaitForResourceExists(t T, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	return c.wait(t, "WaitForResourceExists", id, "the resource exists", c.existsCheck(id, nil))
}

// notFoundCheck passes when the resource does not exist.
func (c *Client) notFoundCheck(id *pbresource.ID) check {
	return func() outcome {
		res, err := c.read(id)
		if err != nil {
			return outcome{problem: fmt.Sprintf("reading it failed: %v", err)}
		}
		if res != nil {
			return outcome{res: res, problem: "it still exists"}
		}
		return outcome{}
	}
}

// RequireResourceNotFound fails t unless the service answers NotFound for
// the resource.
func (c *Client) RequireResourceNotFound(t T, id *pbresource.ID) {
	t.Helper()
	c.require(t, "RequireResourceNotFound", id, "no such resource (NotFound)", c.notFoundCheck(id))
}

// WaitForDeletion waits until the resource no longer exists (for example
// once its finalizers are removed or the reaper has run).
func (c *Client) WaitForDeletion(t T, id *pbresource.ID) {
	t.Helper()
	c.wait(t, "WaitForDeletion", id, "no such resource (NotFound)", c.notFoundCheck(id))
}

// RequireVersionChanged fails t unless the resource exists with a version
// other than prevVersion, and returns it.
func (c *Client) RequireVersionChanged(t T, id *pbresource.ID, prevVersion string) *pbresource.Resource {
	t.Helper()
	return c.require(t, "RequireVersionChanged", id, fmt.Sprintf("a version other than %q", prevVersion),
		c.existsCheck(id, versionIs(prevVersion, false)))
}

// RequireVersionUnchanged fails t unless the resource exists with version
// prevVersion, and returns it.
func (c *Client) RequireVersionUnchanged(t T, id *pbresource.ID, prevVersion string) *pbresource.Resource {
	t.Helper()
	return c.require(t, "RequireVersionUnchanged", id, fmt.Sprintf("version %q, unchanged", prevVersion),
		c.existsCheck(id, versionIs(prevVersion, true)))
}

// WaitForNewVersion waits until the resource exists with a version other
// than prevVersion, and returns it.
func (c *Client) WaitForNewVersion(t T, id *pbresource.ID, prevVersion string) *pbresource.Resource {
	t.Helper()
	return c.wait(t, "WaitForNewVersion", id, fmt.Sprintf("a version other than %q", prevVersion),
		c.existsCheck(id, versionIs(prevVersion, false)))
}

func versionIs(version string, same bool) func(*pbresource.Resource) string {
	return func(res *pbresource.Resource) string {
		switch {
		case same && res.Version != version:
			return fmt.Sprintf("the version changed from %q to %q", version, res.Version)
		case !same && res.Version == version:
			return fmt.Sprintf("the version is still %q", version)
		}
		return ""
	}
}

// conditionCheck returns the verdict on whether the status under key holds
// cond (compared field by field, as proto.Equal does), optionally for the
// resource's current generation.
func conditionCheck(key string, cond *pbresource.Condition, currentGen bool) func(*pbresource.Resource) string {
	return func(res *pbresource.Resource) string {
		st, ok := res.Status[key]
		if !ok {
			return fmt.Sprintf("there is no status %q", key)
		}
		if currentGen && st.ObservedGeneration != res.Generation {
			return fmt.Sprintf("status %q observed generation %s, but the resource's generation is %s",
				key, st.ObservedGeneration, res.Generation)
		}
		for _, have := range st.Conditions {
			if proto.Equal(have, cond) {
				return ""
			}
		}
		for _, have := range st.Conditions {
			if have.GetType() == cond.GetType() {
				return fmt.Sprintf("status %q has a different %q condition:\n%s", key, cond.GetType(), indent(prettyMessage(have)))
			}
		}
		return fmt.Sprintf("status %q has no %q condition", key, cond.GetType())
	}
}

func expectCondition(key string, cond *pbresource.Condition, currentGen bool) string {
	gen := ""
	if currentGen {
		gen = ", observed for the resource's current generation"
	}
	return fmt.Sprintf("status %q holds this condition%s:\n%s", key, gen, indent(prettyMessage(cond)))
}

// RequireStatusCondition fails t unless the resource's status under
// statusKey holds a condition equal to condition (every field, resource
// reference included), and returns the resource.
func (c *Client) RequireStatusCondition(t T, id *pbresource.ID, statusKey string, condition *pbresource.Condition) *pbresource.Resource {
	t.Helper()
	return c.require(t, "RequireStatusCondition", id, expectCondition(statusKey, condition, false),
		c.existsCheck(id, conditionCheck(statusKey, condition, false)))
}

// RequireStatusConditionForCurrentGen is RequireStatusCondition that also
// requires the status to have been written for the resource's current
// generation, i.e. by a controller that has seen its latest data.
func (c *Client) RequireStatusConditionForCurrentGen(t T, id *pbresource.ID, statusKey string, condition *pbresource.Condition) *pbresource.Resource {
	t.Helper()
	return c.require(t, "RequireStatusConditionForCurrentGen", id, expectCondition(statusKey, condition, true),
		c.existsCheck(id, conditionCheck(statusKey, condition, true)))
}

// RequireStatusConditionAbsent fails t unless the resource exists and its
// status under statusKey (if any) has no condition of type condType.
func (c *Client) RequireStatusConditionAbsent(t T, id *pbresource.ID, statusKey, condType string) *pbresource.Resource {
	t.Helper()
	return c.require(t, "RequireStatusConditionAbsent", id, fmt.Sprintf("status %q has no %q condition", statusKey, condType),
		c.existsCheck(id, func(res *pbresource.Resource) string {
			for _, have := range res.Status[statusKey].GetConditions() {
				if have.GetType() == condType {
					return fmt.Sprintf("status %q has a %q condition:\n%s", statusKey, condType, indent(prettyMessage(have)))
				}
			}
			return ""
		}))
}

// WaitForStatusCondition waits until the resource's status under statusKey
// holds condition for the resource's current generation, and returns the
// resource. Requiring the current generation keeps a test from passing on
// a status written before the resource's latest change.
func (c *Client) WaitForStatusCondition(t T, id *pbresource.ID, statusKey string, condition *pbresource.Condition) *pbresource.Resource {
	t.Helper()
	return c.wait(t, "WaitForStatusCondition", id, expectCondition(statusKey, condition, true),
		c.existsCheck(id, conditionCheck(statusKey, condition, true)))
}

// WaitForResourceState waits until the resource exists and check, given
// the resource, passes. check reports problems on the T it is given, as a
// test does (testify's require and assert work); a failed attempt is
// retried with a fresh T after the poll interval. When the wait gives up,
// t fails with what the last attempt reported and the resource it saw.
func (c *Client) WaitForResourceState(t T, id *pbresource.ID, check func(T, *pbresource.Resource)) *pbresource.Resource {
	t.Helper()
	return c.wait(t, "WaitForResourceState", id, "the resource exists and the check passes",
		c.existsCheck(id, func(res *pbresource.Resource) string {
			attempt := runAttempt(func(at T) { check(at, resource.Clone(res)) })
			if attempt.hasFailed() {
				return attempt.report()
			}
			return ""
		}))
}

// deleteOnce deletes id, retrying Aborted conflicts until ctx ends; a
// missing resource is not an error.
func (c *Client) deleteOnce(ctx context.Context, id *pbresource.ID) error {
	for {
		_, err := c.Delete(ctx, &pbresource.DeleteRequest{Id: id})
		switch status.Code(err) {
		case codes.OK, codes.NotFound:
			return nil
		case codes.Aborted:
			if !sleepCtx(ctx, c.poll) {
				return err
			}
		default:
			return err
		}
	}
}

// MustDelete deletes the resource, failing t on any error except that it
// does not exist. Delete conflicts (Aborted) are retried until the
// Client's timeout. A resource with finalizers is only marked for deletion;
// use WaitForDeletion to wait for it to go.
func (c *Client) MustDelete(t T, id *pbresource.ID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.deleteOnce(ctx, id); err != nil {
		fatalf(t, "resourcetest: MustDelete %s: %v", resource.IDString(id), err)
	}
}

// CleanupDelete deletes the resource when the test ends (a resource that
// is gone by then is fine). It is for services that outlive the test, such
// as one shared by several tests; a service started by the test itself
// disappears with it anyway.
func (c *Client) CleanupDelete(t T, id *pbresource.ID) {
	t.Helper()
	id = resource.CloneID(id)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		if err := c.deleteOnce(ctx, id); err != nil {
			t.Errorf("resourcetest: CleanupDelete %s: %v", resource.IDString(id), err)
		}
	})
}
