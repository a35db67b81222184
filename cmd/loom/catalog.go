package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Type names on the command line. Every command that takes a TYPE resolves
// it with clientFlags.typeOf: "group.version.kind" as is, with no request;
// any other form, case-insensitive, through the server's type catalog
// (loom.catalog.v1 ListTypes, asked at most once per command):
//
//   - KIND (bar): the registered type of that kind;
//   - GROUP.KIND (foo.bar): the type of that group and kind;
//   - GROUP.VERSION.KIND (foo.v1.bar): that type, case aside.
//
// A name must resolve to one type. One that matches the kind of several
// groups, or a kind registered in several versions (Loom stores each
// resource in one version's form, and a List or Read of another version
// does not find it, so no version is right for every resource), is
// ambiguous: the error lists the candidates. A server with no catalog (Consul's
// answers Unimplemented) needs full names; loom says so once.

// typeCatalog is what a session learned from ListTypes.
type typeCatalog struct {
	types []*pbcatalogv1.TypeInfo
	err   error // ListTypes's error
}

// catalog returns the server's types, asking it on the first call only.
func (s *session) catalog(ctx context.Context) *typeCatalog {
	if s.cat == nil {
		resp, err := pbcatalogv1.NewCatalogServiceClient(s.conn).ListTypes(ctx, &pbcatalogv1.ListTypesRequest{})
		s.cat = &typeCatalog{types: resp.GetTypes(), err: err}
	}
	return s.cat
}

// typeNameRE is what a type argument looks like before it is resolved:
// one to three dot-separated words.
var typeNameRE = regexp.MustCompile(`^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+){0,2}$`)

// typeOf resolves a TYPE argument (see above). Errors that are the
// argument's are usage errors. The connection it may make is the
// command's (clientFlags.session), which call closes; typeOf closes it
// itself when it fails, since the command then ends.
func (c *clientFlags) typeOf(ctx context.Context, stderr io.Writer, arg string) (*pbresource.Type, error) {
	t, err := c.resolveType(ctx, stderr, arg)
	if err != nil && c.sess != nil {
		c.sess.Close()
		c.sess = nil
	}
	return t, err
}

func (c *clientFlags) resolveType(ctx context.Context, stderr io.Writer, arg string) (*pbresource.Type, error) {
	if t, err := resource.ParseType(arg); err == nil {
		return t, nil
	}
	if !typeNameRE.MatchString(arg) {
		return nil, usagef("type %s is not a type name: give KIND, GROUP.KIND or GROUP.VERSION.KIND", resource.Quote(arg))
	}
	s, err := c.session(ctx, stderr)
	if err != nil {
		return nil, c.withHint(err)
	}
	cat := s.catalog(ctx)
	if status.Code(cat.err) == codes.Unimplemented {
		// Said once: the command ends with the error.
		fmt.Fprintln(stderr, "loom: note: the server lists no types (no loom.catalog.v1, e.g. a Consul server): give types in full, as group.version.kind")
		return nil, usagef("type %s is not of the form group.version.kind, which this server needs", resource.Quote(arg))
	}
	if cat.err != nil {
		return nil, c.withHint(fmt.Errorf("resolving type %s: %w", resource.Quote(arg), cat.err))
	}
	return matchType(cat.types, arg)
}

// matchType finds the type arg names among types.
func matchType(types []*pbcatalogv1.TypeInfo, arg string) (*pbresource.Type, error) {
	parts := strings.Split(arg, ".")
	var found []*pbresource.Type
	for _, ti := range types {
		t := ti.GetType()
		var ok bool
		switch len(parts) {
		case 1:
			ok = strings.EqualFold(parts[0], t.Kind)
		case 2:
			ok = strings.EqualFold(parts[0], t.Group) && strings.EqualFold(parts[1], t.Kind)
		case 3:
			ok = strings.EqualFold(parts[0], t.Group) && strings.EqualFold(parts[1], t.GroupVersion) && strings.EqualFold(parts[2], t.Kind)
		}
		if ok {
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return nil, usagef("the server has no type %s (loom types lists them)", resource.Quote(arg))
	}
	var kinds []string
	for _, t := range found {
		if k := resource.UnversionedTypeString(t); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) > 1 {
		slices.Sort(kinds)
		return nil, usagef("type %s is ambiguous: it names %s; give GROUP.KIND", resource.Quote(arg), strings.Join(kinds, ", "))
	}
	if len(found) > 1 {
		names := make([]string, len(found))
		for i, t := range found {
			names[i] = resource.TypeString(t)
		}
		slices.Sort(names)
		return nil, usagef("type %s names %s in several versions (%s), and each lists and reads only what is stored in its own: give GROUP.VERSION.KIND",
			resource.Quote(arg), kinds[0], strings.Join(names, ", "))
	}
	return found[0], nil
}

func runTypes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "types", args: "",
		summary: "Lists the server's resource types, like kubectl api-resources: NAME is the short name\n" +
			"other commands take (case does not matter), SCOPE the tenancy units resources have,\n" +
			"MESSAGE their data's proto message, and READ, LIST and WRITE what your token may do\n" +
			"in the default tenancy (as the types' ACL rules answer there; a rule that decides\n" +
			"by name, tenancy or data may answer otherwise for a given resource).",
		example: "loom types\n" +
			"loom types -o json",
	}, stderr, false)
	format := c.fs.String("o", formatTable, "output `format`: table or json")
	if err := c.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkFormat(*format, formatTable, formatJSON); err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		cat := s.catalog(ctx)
		if cat.err != nil {
			return noCatalog(cat.err)
		}
		if *format == formatJSON {
			return printJSON(stdout, &pbcatalogv1.ListTypesResponse{Types: cat.types})
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tGROUP\tVERSION\tKIND\tSCOPE\tMESSAGE\tREAD\tLIST\tWRITE")
		for _, ti := range cat.types {
			t := ti.GetType()
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortName(cat.types, t), t.Group, t.GroupVersion, t.Kind,
				ti.Scope, ti.Message, yesNo(ti.Read), yesNo(ti.List), yesNo(ti.Write))
		}
		return w.Flush()
	})
}

// shortName is the shortest name that resolves to t (matchType): its kind,
// group.kind or group.version.kind, in lower case.
func shortName(types []*pbcatalogv1.TypeInfo, t *pbresource.Type) string {
	for _, name := range []string{t.Kind, t.Group + "." + t.Kind} {
		if got, err := matchType(types, name); err == nil && resource.EqualType(got, t) {
			return strings.ToLower(name)
		}
	}
	return strings.ToLower(resource.TypeString(t))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// noCatalog explains a failed ListTypes or GetStats.
func noCatalog(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("the server does not serve loom.catalog.v1 (e.g. a Consul server, or storage that keeps no counts): %w", err)
	}
	return err
}

// printJSON prints m as indented JSON.
func printJSON(stdout io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "stats", args: "[TYPE]",
		summary: "Prints how many resources of each type the server stores (from counts its storage\n" +
			"keeps, never a scan): RESOURCES, of which MARKED are marked for deletion and wait for\n" +
			"their finalizers; tombstones are the type resource.Tombstone. Only the types and\n" +
			"tenancies your token may list are counted. -by-tenancy counts each tenancy apart.",
		example: "loom stats\n" +
			"loom stats bar -by-tenancy",
	}, stderr, false)
	byTenancy := c.fs.Bool("by-tenancy", false, "count each tenancy apart")
	format := c.fs.String("o", formatTable, "output `format`: table or json")
	if err := c.parse(args, 0, 1); err != nil {
		return err
	}
	if err := checkFormat(*format, formatTable, formatJSON); err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		req := &pbcatalogv1.GetStatsRequest{ByTenancy: *byTenancy}
		if len(c.args) == 1 {
			t, err := c.typeOf(ctx, stderr, c.args[0])
			if err != nil {
				return err
			}
			req.Type = t
		}
		resp, err := pbcatalogv1.NewCatalogServiceClient(s.conn).GetStats(ctx, req)
		if err != nil {
			return noCatalog(err)
		}
		if *format == formatJSON {
			return printJSON(stdout, resp)
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		if *byTenancy {
			fmt.Fprintln(w, "TYPE\tPARTITION\tNAMESPACE\tRESOURCES\tMARKED")
		} else {
			fmt.Fprintln(w, "TYPE\tRESOURCES\tMARKED")
		}
		for _, tc := range resp.Counts {
			name := resource.UnversionedTypeString(tc.Type)
			if *byTenancy {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", name, tc.Tenancy.GetPartition(), tc.Tenancy.GetNamespace(), tc.Resources, tc.MarkedForDeletion)
			} else {
				fmt.Fprintf(w, "%s\t%d\t%d\n", name, tc.Resources, tc.MarkedForDeletion)
			}
		}
		return w.Flush()
	})
}
