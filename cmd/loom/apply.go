package main

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// carriedMetadata are the metadata keys apply keeps from the stored
// resource when the file does not set them: what controllers and Delete
// add, which a file kept in git does not know about.
var carriedMetadata = []string{resource.FinalizerKey, resource.DeletionTimestampKey}

func runApply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "apply", args: "-f FILE|DIR|- ...",
		summary: "Creates or updates, by name, the resources in the files, and prints for each whether\n" +
			"it was created, updated or unchanged. A file is YAML or JSON; YAML may hold many\n" +
			"resources separated by \"---\", and either may hold a list of them (what list -o yaml\n" +
			"prints). A resource is written as read prints it; id.type may be \"group.version.kind\".\n" +
			"\n" +
			"Every resource is parsed, and checked by the server (MutateAndValidate), before any is\n" +
			"written, and so are the owners they name (each must exist, or be in the files, which\n" +
			"are then written owners first): one bad document rejects the whole set, naming its\n" +
			"file and document. A resource whose data, metadata and owner equal the stored ones is\n" +
			"not written (\"unchanged\"), on Consul too.\n" +
			"Finalizers that controllers added are kept unless the file sets \"finalizers\"; the\n" +
			"status is the controllers' (a status in the file is ignored). A version in the file\n" +
			"makes the write conditional on it (compare-and-swap).\n" +
			"With 20 or more resources (and neither -dry-run nor -o), a Loom server gets them in one\n" +
			"bulk import, which it checks as a whole and writes many at a time (import's path); a\n" +
			"server without it (Consul) gets them one Write at a time.",
		example: "loom apply -f bar.yaml\n" +
			"loom apply -f ./resources/ -dry-run -o yaml\n" +
			"cat bars.yaml | loom apply -f -",
	}, stderr, false)
	var files stringList
	c.fs.Var(&files, "f", "`file`, directory (its .yaml, .yml and .json files) or \"-\" to apply (repeatable)")
	dryRun := c.fs.Bool("dry-run", false, "only check the resources with the server (MutateAndValidate) and print them as they would be written")
	format := c.fs.String("o", "", "print the resulting resources in this `format` (yaml, json or name) instead of one line each")
	lim := addInputFlags(c.fs)
	if err := c.parse(args, 0, -1); err != nil {
		return err
	}
	if err := lim.check(); err != nil {
		return err
	}
	if len(c.args) > 0 {
		return usagef("%s: files are given with -f (-f %s), not as arguments", c.fs.Name(), c.args[0])
	}
	if len(files) == 0 {
		return usagef("%s: -f FILE is required", c.fs.Name())
	}
	if *format != "" {
		if err := checkFormat(*format, formatYAML, formatJSON, formatName); err != nil {
			return err
		}
	}
	return c.call(ctx, stderr, func(ctx context.Context, s *session) error {
		docs, err := readDocuments(files, stdin, s.types, *lim)
		if err != nil {
			return err
		}
		return applyDocuments(ctx, s, docs, *dryRun, *format, stdout)
	})
}

// applyDocuments checks docs, then writes them through s, printing what
// became of each (or, with format, the resources) on stdout.
func applyDocuments(ctx context.Context, s *session, docs []document, dryRun bool, format string, stdout io.Writer) error {
	if err := checkDuplicates(docs); err != nil {
		return err
	}
	withStatus := 0
	for _, d := range docs {
		if len(d.res.Status) > 0 {
			withStatus++
			d.res.Status = nil
		}
	}
	if withStatus > 0 {
		fmt.Fprintf(s.stderr, "loom: the status of %d resource(s) is ignored: controllers write it\n", withStatus)
	}
	if !dryRun && format == "" && len(docs) >= bulkApplyMin {
		if done, err := applyBulk(ctx, s, docs, stdout); done {
			return err
		}
		// A server without the bulk service (Consul): one at a time.
	}
	checked, err := validateAll(ctx, s.client, docs)
	if status.Code(err) == codes.Unimplemented {
		// An older server: the files were parsed, no more.
		fmt.Fprintf(s.stderr, "loom: the server has no MutateAndValidate: the resources are written unchecked\n")
		checked, err = resources(docs), nil
	}
	if err != nil {
		return err
	}
	steps, err := planApply(ctx, s.client, docs, checked)
	if err != nil {
		return err
	}
	p := s.printer(format, stdout)
	if dryRun {
		if format != "" {
			return p.printResources(checked, len(checked) == 1)
		}
		for _, r := range checked {
			fmt.Fprintf(stdout, "%s valid (dry run)\n", resource.ReferenceString(r.Id))
		}
		return nil
	}
	var out []*pbresource.Resource
	for _, st := range steps {
		res, what, err := applyOne(ctx, s.client, s.types, st)
		if err != nil {
			return fmt.Errorf("%s: %s", st.doc.source, errorText(err))
		}
		if format == "" {
			fmt.Fprintf(stdout, "%s %s\n", resource.ReferenceString(res.Id), what)
		}
		out = append(out, res)
	}
	if format != "" {
		return p.printResources(out, len(out) == 1)
	}
	return nil
}

// checkDuplicates refuses two documents naming the same resource.
func checkDuplicates(docs []document) error {
	seen := map[string]string{}
	for _, d := range docs {
		key := resource.ReferenceString(d.res.Id)
		if first, ok := seen[key]; ok {
			return fmt.Errorf("%s: %s is also in %s", d.source, key, first)
		}
		seen[key] = d.source
	}
	return nil
}

// resources returns the documents' resources.
func resources(docs []document) []*pbresource.Resource {
	out := make([]*pbresource.Resource, len(docs))
	for i, d := range docs {
		out[i] = d.res
	}
	return out
}
