package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server/bulk"
)

// bulkTimeout is the default -timeout of export and import, which bounds
// the whole stream rather than each request.
const bulkTimeout = 10 * time.Minute

// bulkApplyMin is how many documents make apply write through the bulk
// import (one stream, checked by the server as a whole) rather than one
// Write at a time.
const bulkApplyMin = 20

// withBulkTimeout makes -timeout default to bulkTimeout and bound the
// whole command.
func withBulkTimeout(c *clientFlags) {
	c.timeout = bulkTimeout
	c.fs.Lookup("timeout").DefValue = bulkTimeout.String()
	c.fs.Lookup("timeout").Usage = "give up on the export or import after this long"
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "export", args: "",
		summary: "Prints every resource of the given types (default: every type the server has but\n" +
			"Tombstones), consistent at one store version, with their statuses: a logical backup,\n" +
			"which loom import reads back (import -preserve reproduces it in an empty server).\n" +
			"Resources the token may not read are left out. Needs a Loom server (Consul has no\n" +
			"bulk service).",
		example: "loom export > backup.yaml\n" +
			"loom export -types foo.v1.Bar,foo.v1.Zip -o json > bars.json",
	}, stderr, true)
	withBulkTimeout(c)
	types := c.fs.String("types", "", "comma-separated `types` (group.version.kind) to export; empty: every type")
	format := c.fs.String("o", formatYAML, "output `format`: yaml or json")
	noStatus := c.fs.Bool("no-status", false, "leave the statuses out (as files to apply would have them)")
	if err := c.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkFormat(*format, formatYAML, formatJSON); err != nil {
		return err
	}
	req := &pbbulkv1.ExportRequest{WithStatus: !*noStatus, Tenancy: &pbresource.Tenancy{Partition: c.partition, Namespace: c.namespace}}
	for _, t := range strings.Split(*types, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		typ, err := c.typeOf(ctx, stderr, t)
		if err != nil {
			return err
		}
		req.Types = append(req.Types, typ)
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		ctx, cancel := s.bulkContext(ctx)
		defer cancel()
		res, version, err := bulk.ReceiveExport(ctx, s.bulk, req)
		if err != nil {
			return bulkError(err)
		}
		fmt.Fprintf(stderr, "loom: exported %d resource(s) at version %s\n", len(res), version)
		return s.printer(*format, stdout).printResources(res, false)
	})
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "import", args: "-f FILE|DIR|- ...",
		summary: "Imports the resources in the files (what export prints, or files for apply) in one\n" +
			"stream. The server checks all of them first: when any is rejected, nothing is written\n" +
			"and every rejection is printed. Then it writes them, owners first, and prints how many\n" +
			"were created, updated and unchanged: running the same import again changes nothing.\n" +
			"\n" +
			"Without -preserve, resources are written by name as apply writes them: versions, uids,\n" +
			"owner uids, statuses and deletion marks in the files are ignored (the stored\n" +
			"finalizers are kept unless the file sets them). With -preserve (into an empty server,\n" +
			"or names not taken; the token needs the \"restore\" capability), each resource is\n" +
			"created as given: the same uid, owner uid, metadata and statuses; only versions are new.",
		example: "loom export > backup.yaml && loom import -preserve -f backup.yaml -addr new-server:8502\n" +
			"loom import -f ./resources/ -dry-run",
	}, stderr, false)
	withBulkTimeout(c)
	var files stringList
	c.fs.Var(&files, "f", "`file`, directory (its .yaml, .yml and .json files) or \"-\" to import (repeatable)")
	preserve := c.fs.Bool("preserve", false, "create the resources exactly as given (uids, owners, finalizers, statuses), in names not taken")
	dryRun := c.fs.Bool("dry-run", false, "only check the resources, and print what the import would do")
	lim := addInputFlags(c.fs)
	if err := c.parse(args, 0, 0); err != nil {
		return err
	}
	if err := lim.check(); err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("%s: -f FILE is required", c.fs.Name())
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		docs, err := readDocuments(files, stdin, s.types, *lim)
		if err != nil {
			return err
		}
		if !*preserve {
			byName(docs)
		}
		ctx, cancel := s.bulkContext(ctx)
		defer cancel()
		rsp, err := sendDocuments(ctx, s, docs, &pbbulkv1.ImportOptions{Preserve: *preserve, DryRun: *dryRun})
		if err != nil {
			return bulkError(err)
		}
		what := "imported"
		if rsp.DryRun {
			what = "would import (dry run)"
		}
		fmt.Fprintf(stdout, "%s %d resource(s): %d created, %d updated, %d unchanged\n",
			what, len(docs), rsp.Created, rsp.Updated, rsp.Unchanged)
		return nil
	})
}

// bulkContext bounds a bulk stream by the session's timeout.
func (s *session) bulkContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.timeout)
}

// byName readies documents, as export prints them, for an import by name:
// without the versions, uids, owner uids, statuses and deletion marks of
// the server they came from.
func byName(docs []document) {
	for _, d := range docs {
		r := d.res
		r.Version, r.Id.Uid, r.Status = "", "", nil
		if r.Owner != nil {
			r.Owner.Uid = ""
		}
		delete(r.Metadata, resource.DeletionTimestampKey)
	}
}

// sendDocuments imports docs with opts, and turns a response with
// rejections into an error naming each rejected document.
func sendDocuments(ctx context.Context, s *session, docs []document, opts *pbbulkv1.ImportOptions) (*pbbulkv1.ImportResponse, error) {
	rsp, err := bulk.SendImport(ctx, s.bulk, opts, resources(docs))
	if err != nil || rsp.Rejected == 0 {
		return rsp, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d resource(s) rejected, nothing was written:", rsp.Rejected)
	for _, r := range rsp.Rejections {
		src := fmt.Sprintf("resource %d", r.Index)
		if r.Index < uint64(len(docs)) {
			src = docs[r.Index].source
		}
		fmt.Fprintf(&b, "\n  %s: %s", src, r.Reason)
	}
	if rsp.RejectionsOmitted > 0 {
		fmt.Fprintf(&b, "\n  (and %d more)", rsp.RejectionsOmitted)
	}
	return nil, fmt.Errorf("%s", b.String())
}

// bulkError says what an Unimplemented from a server without the bulk
// service means.
func bulkError(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w (the server has no bulk service: a Consul server, or an older Loom; use apply, or list -o yaml)", err)
	}
	return err
}

// applyBulk writes docs through the bulk import, printing what became of
// each, in file order. It returns false, having written nothing, when the
// server has no bulk service.
func applyBulk(ctx context.Context, s *session, docs []document, stdout io.Writer) (bool, error) {
	if s.bulk == nil {
		return false, nil
	}
	ctx, cancel := s.bulkContext(ctx)
	defer cancel()
	rsp, err := sendDocuments(ctx, s, docs, nil)
	if status.Code(err) == codes.Unimplemented {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	for i, d := range docs {
		what := "unchanged"
		switch rsp.Outcomes[i] {
		case pbbulkv1.Outcome_OUTCOME_CREATED:
			what = "created"
		case pbbulkv1.Outcome_OUTCOME_UPDATED:
			what = "updated"
		}
		fmt.Fprintf(stdout, "%s %s\n", resource.ReferenceString(d.res.Id), what)
	}
	return true, nil
}
