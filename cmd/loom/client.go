package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"github.com/loomrt/loom/server"
)

// The client commands talk to a running server (Loom's or Consul's) over
// gRPC, in plaintext unless a -tls-* flag is given. Data messages are read
// and printed with the types the server describes through gRPC reflection,
// or those of a -protoset file (see typeResolver).

// stdin is what "-" reads; tests replace it.
var stdin io.Reader = os.Stdin

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "read", args: "TYPE NAME",
		summary: "Reads one resource and prints it (YAML by default). TYPE is group.version.kind.",
		example: "loom read foo.v1.Bar my-bar\n" +
			"loom read foo.v1.Bar my-bar -namespace team-a -o json",
	}, stderr, true)
	consistent := c.fs.Bool("consistent", false, "ask for a strongly consistent read")
	format := c.fs.String("o", formatYAML, "output `format`: yaml, json, table or name")
	if err := c.parse(args, 2, 2); err != nil {
		return err
	}
	if err := checkFormat(*format, formatYAML, formatJSON, formatTable, formatName); err != nil {
		return err
	}
	id, err := c.id(c.args[0], c.args[1])
	if err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		if *consistent {
			ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
		}
		resp, err := s.client.Read(ctx, &pbresource.ReadRequest{Id: id})
		if err != nil {
			return err
		}
		return s.printer(*format, stdout).printResources([]*pbresource.Resource{resp.Resource}, true)
	})
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "list", args: "TYPE | -owner OWNER [TYPE]",
		summary: "Lists resources of a type, or those a resource owns (-owner). \"*\" as -partition or\n" +
			"-namespace matches every unit. The table's AGE is the time since creation, and\n" +
			"STATUS each controller's conditions; \"(stale)\" marks a status of an older generation.",
		example: "loom list foo.v1.Bar\n" +
			"loom list foo.v1.Bar -namespace '*' -o yaml\n" +
			"loom list -owner foo.v1.Bar/default.default/my-bar\n" +
			"loom list -owner foo.v1.Bar/my-bar foo.v1.Zip\n" +
			"loom list foo.v1.Bar -page-size 1000\n" +
			"loom list foo.v1.Bar -l 'team=payments,tier in (web,api)'\n" +
			"loom list -owner foo.v1.Bar/my-bar -page-size 1000",
	}, stderr, true)
	prefix := c.fs.String("prefix", "", "only names starting with this")
	pageSize := c.fs.Uint("page-size", 0, "read the list in pages of at most `n` resources, all consistent at one version, so no reply nears the message size limit (0: one reply)")
	labels := selectorFlag(c.fs)
	owner := c.fs.String("owner", "", "list what the resource `ID` owns: TYPE/[PARTITION.NAMESPACE/]NAME[@UID] (tenancy from -partition and -namespace when left out)")
	format := c.fs.String("o", formatTable, "output `format`: table, json, yaml or name")
	if err := c.parse(args, 0, 1); err != nil {
		return err
	}
	if err := checkFormat(*format, formatTable, formatJSON, formatYAML, formatName); err != nil {
		return err
	}
	var typ *pbresource.Type
	if len(c.args) == 1 {
		t, err := resource.ParseType(c.args[0])
		if err != nil {
			return usageError{Err: err}
		}
		typ = t
	} else if *owner == "" {
		return usagef("%s: want a TYPE, or -owner", c.fs.Name())
	}
	sel, err := selector.Parse(*labels)
	if err != nil {
		return usageError{Err: fmt.Errorf("-l: %w", err)}
	}
	if *pageSize > server.MaxListPageSize {
		return usagef("%s: -page-size %d is above the server's maximum, %d", c.fs.Name(), *pageSize, server.MaxListPageSize)
	}
	var ownerID *pbresource.ID
	if *owner != "" {
		id, err := parseIDArg(*owner, c.tenancy())
		if err != nil {
			return usageError{Err: fmt.Errorf("-owner: %w", err)}
		}
		ownerID = id
	}
	q := listQuery{typ: typ, tenancy: c.tenancy(), prefix: *prefix, pageSize: uint32(*pageSize), labels: *labels, sel: sel, owner: ownerID}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		list, err := q.run(ctx, s.client)
		if err != nil {
			return err
		}
		// In name order whatever the backend's order, so the output is
		// stable.
		slices.SortStableFunc(list, func(a, b *pbresource.Resource) int {
			return cmp.Or(
				cmp.Compare(resource.TypeString(a.Id.Type), resource.TypeString(b.Id.Type)),
				cmp.Compare(a.Id.Tenancy.GetPartition(), b.Id.Tenancy.GetPartition()),
				cmp.Compare(a.Id.Tenancy.GetNamespace(), b.Id.Tenancy.GetNamespace()),
				cmp.Compare(a.Id.Name, b.Id.Name))
		})
		if err := s.printer(*format, stdout).printResources(list, false); err != nil {
			return err
		}
		if len(list) == 0 && q.owner == nil {
			noteUnreadable(ctx, s.client, typ, c.tenancy(), stderr)
		}
		return nil
	})
}

// listQuery is what list lists: a type's resources, or those an owner
// owns (of typ, when not nil).
type listQuery struct {
	typ      *pbresource.Type
	tenancy  *pbresource.Tenancy
	prefix   string
	pageSize uint32
	labels   string            // -l as given, sent to the server
	sel      selector.Selector // -l parsed
	owner    *pbresource.ID
}

// run reads every page of the listing. The server applies the selector
// (a Loom server) or not (Consul's): run applies it again.
func (q listQuery) run(ctx context.Context, client pbresource.ResourceServiceClient) ([]*pbresource.Resource, error) {
	var list []*pbresource.Resource
	if q.owner == nil {
		req := &pbresource.ListRequest{Type: q.typ, Tenancy: q.tenancy, NamePrefix: q.prefix, PageSize: q.pageSize, LabelSelector: q.labels}
		var err error
		list, err = readPages(func(token string) ([]*pbresource.Resource, string, error) {
			req.PageToken = token
			resp, err := client.List(ctx, req)
			return resp.GetResources(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return nil, err
		}
	} else {
		owner := q.owner
		if owner.Uid == "" {
			// ListByOwner wants the owner's uid: read it.
			resp, err := client.Read(ctx, &pbresource.ReadRequest{Id: owner})
			if err != nil {
				return nil, err
			}
			owner = resp.Resource.Id
		}
		req := &pbresource.ListByOwnerRequest{Owner: owner, PageSize: q.pageSize, LabelSelector: q.labels}
		owned, err := readPages(func(token string) ([]*pbresource.Resource, string, error) {
			req.PageToken = token
			resp, err := client.ListByOwner(ctx, req)
			return resp.GetResources(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return nil, err
		}
		for _, r := range owned {
			if (q.typ == nil || resource.EqualType(q.typ, r.Id.Type)) && strings.HasPrefix(r.Id.Name, q.prefix) {
				list = append(list, r)
			}
		}
	}
	return slices.DeleteFunc(list, func(r *pbresource.Resource) bool { return !q.sel.Matches(r.Metadata) }), nil
}

// readCheckName is the name noteUnreadable reads: any valid name does.
const readCheckName = "loom-read-check"

// noteUnreadable says on stderr when the caller may not read resources of
// typ in tenancy ("*" units read as the type's default), after a List that
// found nothing: a server lists only what the caller may read, so a token
// with list but not read lists nothing. It reads one name, which a server
// refuses with PermissionDenied before it looks the name up: the note says
// what the token may do, never whether anything exists.
func noteUnreadable(ctx context.Context, client pbresource.ResourceServiceClient, typ *pbresource.Type, tenancy *pbresource.Tenancy, stderr io.Writer) {
	t := &pbresource.Tenancy{Partition: tenancy.GetPartition(), Namespace: tenancy.GetNamespace()}
	for _, unit := range []*string{&t.Partition, &t.Namespace} {
		if *unit == "*" {
			*unit = ""
		}
	}
	_, err := client.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: typ, Tenancy: t, Name: readCheckName}})
	if status.Code(err) != codes.PermissionDenied {
		return
	}
	where := ""
	if t.Partition != "" {
		where += " in partition " + t.Partition
	}
	if t.Namespace != "" {
		where += " in namespace " + t.Namespace
	}
	fmt.Fprintf(stderr, "loom: note: the token may not read %s%s: a list shows only what it may read (a viewer needs read and list)\n",
		resource.TypeString(typ), where)
}

// readPages reads a paged listing: page(token) returns one page's
// resources and the next page's token, from "" (the first page) until the
// token is empty. A server that does not page (Consul) sends everything and
// no token. When a later page is Aborted, the store moved past the
// listing's version (writes between pages outran its history): the listing
// starts again from the first page, up to 3 times.
func readPages(page func(token string) ([]*pbresource.Resource, string, error)) ([]*pbresource.Resource, error) {
	var list []*pbresource.Resource
	token := ""
	for restarts := 0; ; {
		res, next, err := page(token)
		if status.Code(err) == codes.Aborted && token != "" && restarts < 3 {
			restarts++
			list, token = nil, ""
			continue
		}
		if err != nil {
			return nil, err
		}
		list = append(list, res...)
		if next == "" {
			return list, nil
		}
		token = next
	}
}

// parseIDArg parses "TYPE/PARTITION.NAMESPACE/NAME[@UID]" (resource.IDString's
// form) or "TYPE/NAME[@UID]" with the given tenancy.
func parseIDArg(s string, tenancy *pbresource.Tenancy) (*pbresource.ID, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 2 && len(parts) != 3 {
		return nil, fmt.Errorf("%s is not of the form TYPE/[PARTITION.NAMESPACE/]NAME[@UID]", resource.Quote(s))
	}
	typ, err := resource.ParseType(parts[0])
	if err != nil {
		return nil, err
	}
	name := parts[len(parts)-1]
	id := &pbresource.ID{Type: typ, Tenancy: tenancy}
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, id.Uid = name[:i], name[i+1:]
	}
	if name == "" {
		return nil, fmt.Errorf("%s has no name", resource.Quote(s))
	}
	id.Name = name
	if len(parts) == 3 {
		p, n, ok := strings.Cut(parts[1], ".")
		if !ok {
			return nil, fmt.Errorf("tenancy %s is not of the form PARTITION.NAMESPACE", resource.Quote(parts[1]))
		}
		id.Tenancy = &pbresource.Tenancy{Partition: p, Namespace: n}
	}
	return id, nil
}

func runWrite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "write", args: "FILE",
		summary: "Writes the one resource in FILE (\"-\" for standard input), as JSON or YAML, either a\n" +
			"Resource ({\"id\": ..., \"data\": ...}) or a WriteRequest ({\"resource\": ...}), and prints\n" +
			"the stored resource. It is a plain Write: prefer apply, which keeps what controllers\n" +
			"added and takes many resources.",
		example: "loom write bar.json\n" +
			"loom read foo.v1.Bar my-bar -o json | loom write -",
	}, stderr, false)
	format := c.fs.String("o", formatJSON, "output `format`: json, yaml or name")
	lim := addInputFlags(c.fs)
	if err := c.parse(args, 1, 1); err != nil {
		return err
	}
	if err := lim.check(); err != nil {
		return err
	}
	if err := checkFormat(*format, formatJSON, formatYAML, formatName); err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		docs, err := readDocuments(c.args, stdin, s.types, *lim)
		if err != nil {
			return err
		}
		if len(docs) != 1 {
			return fmt.Errorf("write takes one resource; %s holds %d (use apply)", c.args[0], len(docs))
		}
		resp, err := s.client.Write(ctx, &pbresource.WriteRequest{Resource: docs[0].res})
		if err != nil {
			return err
		}
		return s.printer(*format, stdout).printResources([]*pbresource.Resource{resp.Resource}, true)
	})
}

func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "delete", args: "TYPE NAME | -f FILE",
		summary: "Deletes a resource, or those in FILE (as for apply), and says for each whether it was\n" +
			"deleted, only marked for deletion (finalizers keep it until controllers remove them),\n" +
			"or not found (which is not an error).",
		example: "loom delete foo.v1.Bar my-bar\n" +
			"loom delete -f bars.yaml",
	}, stderr, true)
	version := c.fs.String("version", "", "delete only if the stored version is this one")
	var files stringList
	c.fs.Var(&files, "f", "`file`, directory or \"-\" of resources to delete (repeatable)")
	lim := addInputFlags(c.fs)
	if err := c.parse(args, 0, 2); err != nil {
		return err
	}
	if err := lim.check(); err != nil {
		return err
	}
	if (len(files) == 0) == (len(c.args) == 0) || (len(files) == 0 && len(c.args) != 2) {
		return usagef("%s: give TYPE NAME, or -f FILE", c.fs.Name())
	}
	var ids []*pbresource.ID
	if len(files) == 0 {
		id, err := c.id(c.args[0], c.args[1])
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		if len(files) > 0 {
			docs, err := readDocuments(files, stdin, s.types, *lim)
			if err != nil {
				return err
			}
			for _, d := range docs {
				ids = append(ids, d.res.Id)
			}
		}
		for _, id := range ids {
			ref, what, err := deleteOne(ctx, s.client, id, *version)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s %s\n", ref, what)
		}
		return nil
	})
}

// deleteOne deletes id and says what became of it, and of which resource:
// the stored one's reference, with its tenancy filled in.
func deleteOne(ctx context.Context, client pbresource.ResourceServiceClient, id *pbresource.ID, version string) (ref, what string, err error) {
	// Consistent reads, so the one after the Delete sees its effect.
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	before, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		return shortRef(id), "not found", nil
	}
	if err != nil {
		return "", "", err
	}
	target := before.Resource.Id // normalized tenancy, with its uid
	ref = resource.ReferenceString(target)
	if _, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: target, Version: version}); err != nil {
		return "", "", err
	}
	after, err := client.Read(ctx, &pbresource.ReadRequest{Id: target})
	if status.Code(err) == codes.NotFound || (err == nil && after.Resource.Id.Uid != target.Uid) {
		return ref, "deleted", nil
	}
	if err != nil {
		return "", "", err
	}
	if f := resource.Finalizers(after.Resource); len(f) > 0 {
		return ref, "marked for deletion (waiting for finalizers: " + strings.Join(f, ", ") + ")", nil
	}
	return ref, "marked for deletion", nil
}

// shortRef is id's reference, leaving out a tenancy left to defaults.
func shortRef(id *pbresource.ID) string {
	if id.GetTenancy().GetPartition() == "" && id.GetTenancy().GetNamespace() == "" {
		return resource.TypeString(id.GetType()) + "/" + id.GetName()
	}
	return resource.ReferenceString(id)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// selectorFlag defines -l, the label selector of list and watch.
func selectorFlag(fs *flag.FlagSet) *string {
	return fs.String("l", "", "only resources whose metadata matches this label `selector`, as kubectl's -l: a=b, a!=b, 'a in (x,y)', 'a notin (x)', a, !a, comma-separated (the server filters, and loom again, as a Consul server ignores it)")
}
