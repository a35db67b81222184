package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// The history commands (history, diff, trash, restore) use Loom's own
// loom.history.v1.HistoryService, which Loom's servers serve beside the
// ResourceService and Consul's do not.

// errNoHistory is what the history commands say when the server does not
// serve the history service, or keeps nothing in it.
var errNoHistory = errors.New("this server keeps no history (it is not a Loom server, or history is off: -history-versions)")

// historyError turns the answer of a server without the history service
// (Unimplemented) into errNoHistory.
func historyError(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return errNoHistory
	}
	return err
}

func (s *session) history() pbhistoryv1.HistoryServiceClient {
	return pbhistoryv1.NewHistoryServiceClient(s.conn)
}

func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "history", args: "TYPE NAME",
		summary: "Lists the kept versions of a resource, newest first, of every lifetime of the name\n" +
			"(deletions included): each change of data or metadata (an owner never changes), and each deletion.\n" +
			"Status writes are not versions. BY is the ACL token's name (\"-\" without ACLs, and for\n" +
			"the server's own controllers); CHANGE is what changed since the version below it.",
		example: "loom history foo.v1.Bar my-bar\n" +
			"loom history foo.v1.Bar my-bar -o yaml",
	}, stderr, true)
	format := c.fs.String("o", formatTable, "output `format`: table, json or yaml")
	if err := c.parse(args, 2, 2); err != nil {
		return err
	}
	if err := checkFormat(*format, formatTable, formatJSON, formatYAML); err != nil {
		return err
	}
	id, err := c.id(ctx, stderr, c.args[0], c.args[1])
	if err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		req := &pbhistoryv1.ListRevisionsRequest{Id: id}
		revs, err := readPages(func(token string) ([]*pbhistoryv1.Revision, string, error) {
			req.PageToken = token
			resp, err := s.history().ListRevisions(ctx, req)
			return resp.GetRevisions(), resp.GetNextPageToken(), historyError(err)
		})
		if err != nil {
			return err
		}
		if len(revs) == 0 {
			return noRevisions(ctx, s, id)
		}
		p := s.printer(*format, stdout)
		if *format != formatTable {
			return p.printRevisions(revs)
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VERSION\tGENERATION\tAGE\tBY\tCHANGE")
		for i, rev := range revs {
			var prev *pbhistoryv1.Revision
			if i+1 < len(revs) {
				prev = revs[i+1]
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", rev.Version, rev.GetResource().GetGeneration(),
				humanDuration(p.now().Sub(rev.GetTime().AsTime())), orDash(rev.By), change(rev, prev))
		}
		return w.Flush()
	})
}

// noRevisions is the error of a name without kept revisions: a live
// resource always has one, unless the server keeps no history.
func noRevisions(ctx context.Context, s *session, id *pbresource.ID) error {
	_, err := s.client.Read(ctx, &pbresource.ReadRequest{Id: id})
	switch status.Code(err) {
	case codes.OK:
		return errNoHistory
	case codes.NotFound:
		return fmt.Errorf("no version of %s is kept: it never existed, or its deletion has left the trash", shortRef(id))
	}
	return err
}

// change says what rev changed since prev, the revision before it (nil
// when none is kept).
func change(rev, prev *pbhistoryv1.Revision) string {
	res := rev.GetResource()
	if rev.Deleted {
		if from := rev.GetCascadeFrom(); from != nil {
			return "deleted (cascade from " + resource.ReferenceString(from) + ")"
		}
		return "deleted"
	}
	old := prev.GetResource()
	if rev.Created {
		return "created"
	}
	if old.GetId().GetUid() != res.GetId().GetUid() || prev.GetDeleted() {
		return "(earliest kept)"
	}
	var what []string
	if !proto.Equal(old.GetData(), res.GetData()) {
		what = append(what, "data")
	}
	if !maps.Equal(old.GetMetadata(), res.GetMetadata()) {
		what = append(what, "metadata")
	}
	if !proto.Equal(old.GetOwner(), res.GetOwner()) {
		what = append(what, "owner")
	}
	return orDash(strings.Join(what, ", "))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printRevisions prints revisions as JSON or YAML, their resources' data
// through the type resolver.
func (p *printer) printRevisions(revs []*pbhistoryv1.Revision) error {
	var docs [][]byte
	for _, rev := range revs {
		rest := &pbhistoryv1.Revision{Version: rev.Version, Time: rev.Time, By: rev.By, CascadeFrom: rev.CascadeFrom, Deleted: rev.Deleted}
		b, err := protojson.Marshal(rest)
		if err != nil {
			return err
		}
		res, err := p.resourceJSON(rev.GetResource())
		if err != nil {
			return err
		}
		if b, err = withField(b, "resource", res); err != nil {
			return err
		}
		docs = append(docs, b)
	}
	return p.printDocs(docs, false)
}

func runDiff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "diff", args: "TYPE NAME [V1 [V2]]",
		summary: "Shows what changed in a resource's data, metadata and owner between two kept versions\n" +
			"(loom history lists them), as a unified diff of their YAML: V1 to V2; V1 to the newest\n" +
			"version; without versions, the version before the newest to the newest. A deletion\n" +
			"reads as nothing. Exit status 0 whether or not they differ.",
		example: "loom diff foo.v1.Bar my-bar\n" +
			"loom diff foo.v1.Bar my-bar 1795819342530192003\n" +
			"loom diff foo.v1.Bar my-bar 1795819342530192003 1795819342530192009",
	}, stderr, true)
	if err := c.parse(args, 2, 4); err != nil {
		return err
	}
	id, err := c.id(ctx, stderr, c.args[0], c.args[1])
	if err != nil {
		return err
	}
	versions := c.args[2:]
	for i, v := range versions {
		if err := checkVersionArg(c, fmt.Sprintf("V%d", i+1), v); err != nil {
			return err
		}
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		a, b, err := revisionsToDiff(ctx, s, id, versions)
		if err != nil {
			return err
		}
		p := s.printer(formatYAML, stdout)
		textA, err := p.revisionText(a)
		if err != nil {
			return err
		}
		textB, err := p.revisionText(b)
		if err != nil {
			return err
		}
		d := unifiedDiff(revisionLabel(a), revisionLabel(b), textA, textB)
		if d == "" {
			fmt.Fprintf(stdout, "No difference in data, metadata or owner between %s and %s.\n", revisionLabel(a), revisionLabel(b))
			return nil
		}
		_, err = io.WriteString(stdout, d)
		return err
	})
}

// checkVersionArg checks that the argument or flag name's value v is a
// store version: a decimal number.
func checkVersionArg(c *clientFlags, name, v string) error {
	if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		return usagef("%s: %s %s is not a version (a decimal number, as loom history lists them)", c.fs.Name(), name, resource.Quote(v))
	}
	return nil
}

// revisionsToDiff reads the two revisions diff compares: those of
// versions, the newest standing in for a missing second; with no versions,
// the newest and the one before (nil when there is none).
func revisionsToDiff(ctx context.Context, s *session, id *pbresource.ID, versions []string) (a, b *pbhistoryv1.Revision, err error) {
	read := func(v string) (*pbhistoryv1.Revision, error) {
		resp, err := s.history().ReadRevision(ctx, &pbhistoryv1.ReadRevisionRequest{Id: id, Version: v})
		return resp.GetRevision(), historyError(err)
	}
	if len(versions) == 2 {
		if a, err = read(versions[0]); err != nil {
			return nil, nil, err
		}
		b, err = read(versions[1])
		return a, b, err
	}
	newest, err := s.history().ListRevisions(ctx, &pbhistoryv1.ListRevisionsRequest{Id: id, PageSize: 2})
	if err != nil {
		return nil, nil, historyError(err)
	}
	revs := newest.GetRevisions()
	if len(revs) == 0 {
		return nil, nil, noRevisions(ctx, s, id)
	}
	if len(versions) == 1 {
		a, err = read(versions[0])
		return a, revs[0], err
	}
	if len(revs) > 1 {
		a = revs[1]
	}
	return a, revs[0], nil
}

// revisionText is what diff compares of a revision: its resource's owner,
// metadata and data as YAML; nothing for a deletion, or no revision.
func (p *printer) revisionText(rev *pbhistoryv1.Revision) (string, error) {
	if rev == nil || rev.Deleted {
		return "", nil
	}
	res := rev.GetResource()
	b, err := p.resourceJSON(&pbresource.Resource{Owner: res.Owner, Metadata: res.Metadata, Data: res.Data})
	if err != nil {
		return "", err
	}
	y, err := jsonToYAML(b)
	return string(y), err
}

// revisionLabel names a revision in diff's headers: the resource with its
// Uid, the version and the time of the change.
func revisionLabel(rev *pbhistoryv1.Revision) string {
	if rev == nil {
		return "/dev/null"
	}
	s := fmt.Sprintf("%s version %s (%s", resource.IDString(rev.GetResource().GetId()), rev.Version,
		rev.GetTime().AsTime().UTC().Format(time.RFC3339))
	if rev.Deleted {
		s += ", deleted"
	}
	return s + ")"
}

func runTrash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "trash", args: "TYPE",
		summary: "Lists the deleted resources of a type kept in the trash, newest deletion first, from\n" +
			"which loom restore brings them back. \"*\" as -partition or -namespace matches every\n" +
			"unit. DELETED is the time since the deletion, VERSION the deletion's version, and BY\n" +
			"who deleted it: the ACL token's name (\"-\" without ACLs), or the owner whose deletion\n" +
			"cascaded to it.",
		example: "loom trash foo.v1.Bar\n" +
			"loom trash foo.v1.Bar -prefix web- -namespace '*'",
	}, stderr, true)
	prefix := c.fs.String("prefix", "", "only names starting with this")
	format := c.fs.String("o", formatTable, "output `format`: table, json or yaml")
	if err := c.parse(args, 1, 1); err != nil {
		return err
	}
	if err := checkFormat(*format, formatTable, formatJSON, formatYAML); err != nil {
		return err
	}
	typ, err := c.typeOf(ctx, stderr, c.args[0])
	if err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		req := &pbhistoryv1.ListTrashRequest{Type: typ, Tenancy: c.tenancy(), NamePrefix: *prefix}
		revs, err := readPages(func(token string) ([]*pbhistoryv1.Revision, string, error) {
			req.PageToken = token
			resp, err := s.history().ListTrash(ctx, req)
			return resp.GetRevisions(), resp.GetNextPageToken(), historyError(err)
		})
		if err != nil {
			return err
		}
		p := s.printer(*format, stdout)
		if *format != formatTable {
			return p.printRevisions(revs)
		}
		if len(revs) == 0 {
			fmt.Fprintln(stderr, "No deleted resources found.")
			return nil
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tTENANCY\tUID\tDELETED\tVERSION\tBY")
		for _, rev := range revs {
			id := rev.GetResource().GetId()
			by := orDash(rev.By)
			if from := rev.GetCascadeFrom(); from != nil {
				by = "cascade from " + resource.ReferenceString(from)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", id.GetName(), tenancyColumn(id.GetTenancy()), id.GetUid(),
				humanDuration(p.now().Sub(rev.GetTime().AsTime())), rev.Version, by)
		}
		return w.Flush()
	})
}

func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "restore", args: "TYPE NAME",
		summary: "Brings a deleted resource back from the trash, or rolls a live one back.\n" +
			"Without -version: the newest deletion of the name comes back as a new lifetime (a new\n" +
			"uid), without status; refused when the name is live. With -version V (loom history\n" +
			"lists them): a live resource's data and metadata are written back to V's, as a new\n" +
			"version (compare-and-swap); a deleted one comes back as V stored it. -with-owned also\n" +
			"restores what the deletion's cascade removed, owned by the new uids; the exit status\n" +
			"is 1 if any could not be.",
		example: "loom restore foo.v1.Bar my-bar\n" +
			"loom restore foo.v1.Bar my-bar -with-owned\n" +
			"loom restore foo.v1.Bar my-bar -version 1795819342530192003",
	}, stderr, true)
	version := c.fs.String("version", "", "the `version` to restore (default: the newest deletion in the trash)")
	expected := c.fs.String("expected-version", "", "on a roll-back, write only if the stored `version` is this one (default: the one read first)")
	withOwned := c.fs.Bool("with-owned", false, "also restore what the deletion cascaded to, recursively")
	if err := c.parse(args, 2, 2); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"-version", *version}, {"-expected-version", *expected}} {
		if f.v == "" {
			continue
		}
		if err := checkVersionArg(c, f.name, f.v); err != nil {
			return err
		}
	}
	if *expected != "" && *version == "" {
		return usagef("%s: -expected-version goes with -version (a roll-back)", c.fs.Name())
	}
	id, err := c.id(ctx, stderr, c.args[0], c.args[1])
	if err != nil {
		return err
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
		read, err := s.client.Read(ctx, &pbresource.ReadRequest{Id: id})
		live := read.GetResource()
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		if live != nil && *version == "" {
			return fmt.Errorf("%s is live: to roll it back, give -version (loom history %s %s lists the versions)",
				resource.ReferenceString(live.Id), c.args[0], c.args[1])
		}
		resp, err := s.history().Restore(ctx, &pbhistoryv1.RestoreRequest{Id: id, Version: *version, ExpectedVersion: *expected, WithOwned: *withOwned})
		if err != nil {
			return historyError(err)
		}
		res := resp.GetResource()
		switch {
		case live != nil && live.Version == res.GetVersion():
			fmt.Fprintf(stdout, "%s unchanged: version %s holds version %s's data and metadata already\n", resource.ReferenceString(res.Id), res.Version, *version)
		case live != nil && live.Id.Uid == res.GetId().GetUid():
			fmt.Fprintf(stdout, "%s rolled back to version %s: now version %s\n", resource.ReferenceString(res.Id), *version, res.Version)
		default:
			fmt.Fprintf(stdout, "%s restored: uid %s, version %s\n", resource.ReferenceString(res.GetId()), res.GetId().GetUid(), res.GetVersion())
		}
		for _, o := range resp.Owned {
			fmt.Fprintf(stdout, "%s restored (owned, from version %s): uid %s, version %s\n", resource.ReferenceString(o.Id), o.FromVersion, o.Id.GetUid(), o.Version)
		}
		for _, n := range resp.NotRestored {
			fmt.Fprintf(stdout, "%s not restored (owned, from version %s): %s: %s\n", resource.IDString(n.Id), n.FromVersion, n.Code, n.Reason)
		}
		if len(resp.NotRestored) > 0 {
			return fmt.Errorf("%d owned resource(s) not restored (see above)", len(resp.NotRestored))
		}
		return nil
	})
}
