// Package aclmatrix is the ACL matrix of issue 21: every ResourceService
// RPC × token shape × stored-vs-requested GroupVersion × owner visibility,
// against a server with an ACL file over a given backend, asserting the
// gRPC code of each call (and, for lists and watches, what they show).
// server runs it over the in-memory backend, storage/etcd over etcd.
//
// The expected answers come from a small model of the rules (may), not
// from the server: a resource stored under another GroupVersion than a
// request names must be allowed as both types; naming an owner on create
// needs read access to it; ListByOwner needs list access to the owner's
// type; a watch shows a resource of another GroupVersion only to a caller
// that may read and list it as that type.
package aclmatrix

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// The types of the matrix.
const (
	barV1 = "foo.v1.Bar"
	barV2 = "foo.v2.Bar"
	zip   = "foo.v1.Zip" // the owners
)

type rule struct{ typ, access string }

// shape is a kind of token: how it is presented and its rules.
type shape struct {
	name   string
	secret string // "": no token at all
	known  bool   // the ACL file names it
	rules  []rule
}

var shapes = []shape{
	{name: "none"},
	{name: "unknown", secret: "not-in-the-file"},
	{name: "no-rules", known: true},
	{name: "read-only", known: true, rules: []rule{{"foo.*.Bar", "read"}}},
	{name: "list-only", known: true, rules: []rule{{"foo.*.Bar", "list"}}},
	{name: "read+list-v2", known: true, rules: []rule{{"foo.*.Bar", "read"}, {barV2, "list"}}},
	{name: "write-v1", known: true, rules: []rule{{barV1, "write"}}},
	{name: "write-v2", known: true, rules: []rule{{barV2, "write"}}},
	{name: "full", known: true, rules: []rule{{"*.*.*", "write"}}},
}

// ownerRules make the owners visible: read and list access to their type.
var ownerRules = []rule{{zip, "read"}, {zip, "list"}}

// token is a shape with or without the owner rules.
type token struct {
	shape
	ownerVisible bool
}

func (tk token) name() string {
	if tk.ownerVisible {
		return tk.shape.name + "+owner"
	}
	return tk.shape.name
}

func (tk token) rules() []rule {
	if tk.ownerVisible {
		return append(append([]rule(nil), tk.shape.rules...), ownerRules...)
	}
	return tk.shape.rules
}

// may is the model: whether tk's rules grant access to typ.
func (tk token) may(access, typ string) bool {
	for _, r := range tk.rules() {
		if (r.access == access || r.access == "write") && matchType(r.typ, typ) {
			return true
		}
	}
	return false
}

func matchType(pattern, typ string) bool {
	p, t := strings.Split(pattern, "."), strings.Split(typ, ".")
	for i := range p {
		if p[i] != "*" && p[i] != t[i] {
			return false
		}
	}
	return true
}

// aclFile renders the tokens the file names.
func aclFile(tokens []token) string {
	var b strings.Builder
	b.WriteString("tokens:\n")
	for _, tk := range tokens {
		if !tk.known {
			continue
		}
		fmt.Fprintf(&b, "  - name: %s\n    secret: %q\n    rules:\n", tk.name(), tk.secretOf())
		if len(tk.rules()) == 0 {
			b.WriteString("      []\n")
		}
		for _, r := range tk.rules() {
			fmt.Fprintf(&b, "      - {type: %q, partition: \"*\", namespace: \"*\", access: %s}\n", r.typ, r.access)
		}
	}
	return b.String()
}

func (tk token) secretOf() string {
	if tk.known {
		return tk.name() + "-secret"
	}
	return tk.secret
}

// outcome is what a call should give: a code and, for calls that list, how
// many resources they show.
type outcome struct {
	code  codes.Code
	count int
}

// env is what the cases share: one server with the ACL file over the
// backend, a client to it over gRPC, and an admin client that bypasses
// ACLs (another server over the same backend) for the fixtures.
type env struct {
	client pbresource.ResourceServiceClient
	admin  pbresource.ResourceServiceClient
}

// fixture is what one case starts from: an owner (a Zip) and, under the
// case's name, a Bar it owns, stored as the case's stored GroupVersion.
type fixture struct {
	owner *pbresource.Resource
	bar   *pbresource.Resource
}

// rpc is one call of the matrix. setup (optional) changes the fixture;
// call makes the call as the token and returns what it showed; want is the
// model's answer.
type rpc struct {
	name  string
	setup func(ctx context.Context, e *env, f *fixture) error
	call  func(ctx context.Context, e *env, c *matrixCase) (int, error)
	want  func(c *matrixCase) outcome
}

type matrixCase struct {
	name              string
	tk                token
	stored, requested string // GroupVersion types: barV1 or barV2
	rpc               rpc
	f                 fixture
}

// Run runs the matrix on a server over backend, which must be empty of the
// example types' resources in the default partition's names the matrix
// uses (c0001…). It shares one server and one gRPC connection among all
// cases, which run concurrently.
func Run(t *testing.T, backend storage.Backend) {
	e := newEnv(t, backend)
	var cases []*matrixCase
	for _, tk := range tokens() {
		for _, stored := range []string{barV1, barV2} {
			for _, requested := range []string{barV1, barV2} {
				for _, r := range rpcs {
					cases = append(cases, &matrixCase{
						name: fmt.Sprintf("c%04d", len(cases)), tk: tk,
						stored: stored, requested: requested, rpc: r,
					})
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	setup, sctx := errgroup.WithContext(ctx)
	setup.SetLimit(32)
	for _, c := range cases {
		setup.Go(func() error {
			if err := c.makeFixture(sctx, e); err != nil {
				return fmt.Errorf("%s: fixture: %w", c.name, err)
			}
			return nil
		})
	}
	if err := setup.Wait(); err != nil {
		t.Fatal(err)
	}

	var run errgroup.Group
	run.SetLimit(32)
	for _, c := range cases {
		run.Go(func() error {
			cctx := ctx
			if c.tk.secret != "" || c.tk.known {
				cctx = metadata.AppendToOutgoingContext(ctx, resource.TokenMetadataKey, c.tk.secretOf())
			}
			count, err := c.rpc.call(cctx, e, c)
			want := c.want()
			got := outcome{code: status.Code(err), count: count}
			if err != nil {
				got.count = 0
			}
			if got != want {
				t.Errorf("%s: %s as %s, stored %s, requested %s: got %v (%d shown), want %v (%d shown); error: %v",
					c.name, c.rpc.name, c.tk.name(), c.stored, c.requested, got.code, got.count, want.code, want.count, err)
			}
			return nil
		})
	}
	_ = run.Wait()
	t.Logf("%d cases", len(cases))
}

// want is the model's answer: Unauthenticated without a known token, else
// the RPC's own; a failed call shows nothing.
func (c *matrixCase) want() outcome {
	if !c.tk.known {
		return outcome{code: codes.Unauthenticated}
	}
	o := c.rpc.want(c)
	if o.code != codes.OK {
		o.count = 0
	}
	return o
}

// tokens returns every shape without the owner rules and, where they make
// a difference, with them.
func tokens() []token {
	var out []token
	for _, sh := range shapes {
		out = append(out, token{shape: sh})
		if sh.known && sh.name != "full" {
			out = append(out, token{shape: sh, ownerVisible: true})
		}
	}
	return out
}

func newEnv(t *testing.T, backend storage.Backend) *env {
	path := filepath.Join(t.TempDir(), "acl.yaml")
	if err := os.WriteFile(path, []byte(aclFile(tokens())), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := acl.NewSource(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := resource.NewRegistry()
	if err := foo.RegisterTypes(reg); err != nil {
		t.Fatal(err)
	}
	svc := server.New(server.Config{Backend: backend, Registry: reg, ACLResolver: src.Resolve})
	gs := grpc.NewServer(svc.ServerOptions()...)
	svc.Register(gs)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { svc.Shutdown(); gs.Stop() })
	conn, err := grpc.NewClient("passthrough:///aclmatrix",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	admin := server.NewInProcessClient(server.New(server.Config{Backend: backend, Registry: reg}))
	return &env{client: pbresource.NewResourceServiceClient(conn), admin: admin}
}

// makeFixture writes the case's owner and its Bar, as the admin.
func (c *matrixCase) makeFixture(ctx context.Context, e *env) error {
	o, err := e.admin.Write(ctx, &pbresource.WriteRequest{Resource: newZip("o-" + c.name)})
	if err != nil {
		return err
	}
	c.f.owner = o.Resource
	bar := newBar(c.stored, c.name, "stored")
	bar.Owner = ownerRef(c.f.owner)
	b, err := e.admin.Write(ctx, &pbresource.WriteRequest{Resource: bar})
	if err != nil {
		return err
	}
	c.f.bar = b.Resource
	if c.rpc.setup != nil {
		return c.rpc.setup(ctx, e, &c.f)
	}
	return nil
}

func typeOf(s string) *pbresource.Type {
	p := strings.Split(s, ".")
	return &pbresource.Type{Group: p[0], GroupVersion: p[1], Kind: p[2]}
}

func barID(typ, name string) *pbresource.ID {
	return &pbresource.ID{Type: typeOf(typ), Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

func newBar(typ, name, baz string) *pbresource.Resource {
	var data proto.Message = &pbfoov1.Bar{Baz: baz}
	if typ == barV2 {
		data = &pbfoov2.Bar{Baz: baz}
	}
	a, err := anypb.New(data)
	if err != nil {
		panic(err)
	}
	return &pbresource.Resource{Id: barID(typ, name), Data: a}
}

func newZip(name string) *pbresource.Resource {
	a, err := anypb.New(&pbfoov1.Zip{Zap: "z"})
	if err != nil {
		panic(err)
	}
	return &pbresource.Resource{Id: &pbresource.ID{Type: typeOf(zip), Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name}, Data: a}
}

// ownerRef is owner's ID without its Uid, as a writer names an owner.
func ownerRef(owner *pbresource.Resource) *pbresource.ID {
	id := proto.Clone(owner.Id).(*pbresource.ID)
	id.Uid = ""
	return id
}

// code answers code when the check passes, PermissionDenied otherwise.
func code(allowed bool, code codes.Code) outcome {
	if !allowed {
		return outcome{code: codes.PermissionDenied}
	}
	return outcome{code: code}
}

// writeBoth is the rule of every write path: write access as the requested
// type and as the stored one.
func (c *matrixCase) writeBoth() bool {
	return c.tk.may("write", c.requested) && c.tk.may("write", c.stored)
}

func (c *matrixCase) sameGV() bool { return c.stored == c.requested }

// the RPCs of the matrix.
var rpcs = []rpc{
	{
		name: "Read",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			_, err := e.client.Read(ctx, &pbresource.ReadRequest{Id: barID(c.requested, c.name)})
			return 1, err
		},
		want: func(c *matrixCase) outcome {
			ok := c.tk.may("read", c.requested) && c.tk.may("read", c.stored)
			if !c.sameGV() {
				return code(ok, codes.InvalidArgument)
			}
			o := code(ok, codes.OK)
			if ok {
				o.count = 1
			}
			return o
		},
	},
	{
		name: "Write/update",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			res := newBar(c.requested, c.name, "changed")
			res.Owner = ownerRef(c.f.owner)
			_, err := e.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
			return 0, err
		},
		want: func(c *matrixCase) outcome { return code(c.writeBoth(), codes.OK) },
	},
	{
		name: "Write/create-owned",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			res := newBar(c.requested, "n-"+c.name, "new")
			res.Owner = ownerRef(c.f.owner)
			_, err := e.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
			return 0, err
		},
		want: func(c *matrixCase) outcome {
			return code(c.tk.may("write", c.requested) && c.tk.may("read", zip), codes.OK)
		},
	},
	{
		name: "Write/create-owner-missing",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			res := newBar(c.requested, "n-"+c.name, "new")
			res.Owner = ownerRef(newZip("missing-" + c.name))
			_, err := e.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
			return 0, err
		},
		want: func(c *matrixCase) outcome {
			return code(c.tk.may("write", c.requested) && c.tk.may("read", zip), codes.InvalidArgument)
		},
	},
	{
		name: "Write/create-owner-wrong-uid",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			res := newBar(c.requested, "n-"+c.name, "new")
			res.Owner = ownerRef(c.f.owner)
			res.Owner.Uid = resource.NewULID()
			_, err := e.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
			if err != nil && strings.Contains(err.Error(), c.f.owner.Id.Uid) {
				return 0, fmt.Errorf("the error tells the stored owner's uid: %w", err)
			}
			return 0, err
		},
		want: func(c *matrixCase) outcome {
			return code(c.tk.may("write", c.requested) && c.tk.may("read", zip), codes.InvalidArgument)
		},
	},
	{
		name:  "Write/remove-finalizer",
		setup: markForDeletion,
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			marked, err := e.admin.Read(ctx, &pbresource.ReadRequest{Id: c.f.bar.Id})
			if err != nil {
				return 0, fmt.Errorf("admin read: %w", err)
			}
			res := newBar(c.requested, c.name, "stored")
			res.Owner = ownerRef(c.f.owner)
			res.Metadata = map[string]string{resource.DeletionTimestampKey: marked.Resource.Metadata[resource.DeletionTimestampKey]}
			_, err = e.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
			return 0, err
		},
		want: func(c *matrixCase) outcome {
			if c.sameGV() {
				return code(c.writeBoth(), codes.OK)
			}
			// Only finalizers may change, and the data of another
			// GroupVersion is a change.
			return code(c.writeBoth(), codes.InvalidArgument)
		},
	},
	{
		name: "WriteStatus",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			id := barID(c.requested, c.name)
			id.Uid = c.f.bar.Id.Uid
			_, err := e.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: id, Key: "k",
				Status: &pbresource.Status{ObservedGeneration: c.f.bar.Generation}})
			return 0, err
		},
		want: func(c *matrixCase) outcome { return code(c.writeBoth(), codes.OK) },
	},
	{
		name: "WriteStatus/wrong-uid",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			id := barID(c.requested, c.name)
			id.Uid = resource.NewULID()
			_, err := e.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: id, Key: "k",
				Status: &pbresource.Status{ObservedGeneration: c.f.bar.Generation}})
			return 0, err
		},
		want: func(c *matrixCase) outcome { return code(c.writeBoth(), codes.FailedPrecondition) },
	},
	{
		name: "Delete",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			_, err := e.client.Delete(ctx, &pbresource.DeleteRequest{Id: barID(c.requested, c.name)})
			return 0, err
		},
		want: func(c *matrixCase) outcome { return code(c.writeBoth(), codes.OK) },
	},
	{
		name: "Delete/wrong-uid",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			id := barID(c.requested, c.name)
			id.Uid = resource.NewULID()
			_, err := e.client.Delete(ctx, &pbresource.DeleteRequest{Id: id})
			return 0, err
		},
		want: func(c *matrixCase) outcome { return code(c.writeBoth(), codes.FailedPrecondition) },
	},
	{
		name: "List",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			rsp, err := e.client.List(ctx, &pbresource.ListRequest{Type: typeOf(c.requested),
				Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}, NamePrefix: c.name})
			return len(rsp.GetResources()), err
		},
		want: func(c *matrixCase) outcome {
			// List shows only the requested GroupVersion.
			o := code(c.tk.may("list", c.requested), codes.OK)
			if c.sameGV() && c.tk.may("read", c.stored) {
				o.count = 1
			}
			return o
		},
	},
	{
		name: "ListByOwner",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			rsp, err := e.client.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: c.f.owner.Id})
			return len(rsp.GetResources()), err
		},
		want: func(c *matrixCase) outcome {
			o := code(c.tk.may("list", zip), codes.OK)
			if c.tk.may("read", c.stored) {
				o.count = 1
			}
			return o
		},
	},
	{
		name: "WatchList",
		call: watchSnapshot,
		want: func(c *matrixCase) outcome {
			o := code(c.tk.may("list", c.requested), codes.OK)
			if c.tk.may("read", c.stored) && c.tk.may("list", c.stored) {
				o.count = 1
			}
			return o
		},
	},
	{
		name: "MutateAndValidate",
		call: func(ctx context.Context, e *env, c *matrixCase) (int, error) {
			res := newBar(c.requested, c.name, "changed")
			_, err := e.client.MutateAndValidate(ctx, &pbresource.MutateAndValidateRequest{Resource: res})
			return 0, err
		},
		want: func(c *matrixCase) outcome { return code(c.writeBoth(), codes.OK) },
	},
}

// markForDeletion gives the fixture's Bar a finalizer and marks it.
func markForDeletion(ctx context.Context, e *env, f *fixture) error {
	res := proto.Clone(f.bar).(*pbresource.Resource)
	res.Metadata = map[string]string{resource.FinalizerKey: "aclmatrix"}
	res.Version = ""
	w, err := e.admin.Write(ctx, &pbresource.WriteRequest{Resource: res})
	if err != nil {
		return err
	}
	f.bar = w.Resource
	_, err = e.admin.Delete(ctx, &pbresource.DeleteRequest{Id: f.bar.Id})
	return err
}

// watchSnapshot watches the requested type with the case's name as prefix
// and counts the snapshot's resources.
func watchSnapshot(ctx context.Context, e *env, c *matrixCase) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := e.client.WatchList(ctx, &pbresource.WatchListRequest{Type: typeOf(c.requested),
		Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}, NamePrefix: c.name})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		ev, err := stream.Recv()
		if err != nil {
			return 0, err
		}
		switch {
		case ev.GetUpsert() != nil:
			n++
		case ev.GetEndOfSnapshot() != nil:
			return n, nil
		}
	}
}
