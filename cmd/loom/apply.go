package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
			"written: one bad document rejects the whole set, naming its file and document.\n" +
			"Finalizers that controllers added are kept unless the file sets \"finalizers\"; the\n" +
			"status is the controllers' (a status in the file is ignored). A version in the file\n" +
			"makes the write conditional on it (compare-and-swap).",
		example: "loom apply -f bar.yaml\n" +
			"loom apply -f ./resources/ -dry-run -o yaml\n" +
			"cat bars.yaml | loom apply -f -",
	}, stderr, false)
	var files stringList
	c.fs.Var(&files, "f", "`file`, directory (its .yaml, .yml and .json files) or \"-\" to apply (repeatable)")
	dryRun := c.fs.Bool("dry-run", false, "only check the resources with the server (MutateAndValidate) and print them as they would be written")
	format := c.fs.String("o", "", "print the resulting resources in this `format` (yaml, json or name) instead of one line each")
	if err := c.parse(args, 0, -1); err != nil {
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
		docs, err := readDocuments(files, stdin, s.types)
		if err != nil {
			return err
		}
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
			fmt.Fprintf(stderr, "loom: the status of %d resource(s) is ignored: controllers write it\n", withStatus)
		}
		checked, err := validateAll(ctx, s.client, docs)
		if status.Code(err) == codes.Unimplemented {
			// An older server: the files were parsed, no more.
			fmt.Fprintf(stderr, "loom: the server has no MutateAndValidate: the resources are written unchecked\n")
			checked, err = resources(docs), nil
		}
		if err != nil {
			return err
		}
		p := s.printer(*format, stdout)
		if *dryRun {
			if *format != "" {
				return p.printResources(checked, len(checked) == 1)
			}
			for _, r := range checked {
				fmt.Fprintf(stdout, "%s valid (dry run)\n", resource.ReferenceString(r.Id))
			}
			return nil
		}
		var out []*pbresource.Resource
		for _, d := range docs {
			res, what, err := applyOne(ctx, s.client, d)
			if err != nil {
				return fmt.Errorf("%s: %s", d.source, errorText(err))
			}
			if *format == "" {
				fmt.Fprintf(stdout, "%s %s\n", resource.ReferenceString(res.Id), what)
			}
			out = append(out, res)
		}
		if *format != "" {
			return p.printResources(out, len(out) == 1)
		}
		return nil
	})
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

// applyOne writes d's resource, keeping the stored metadata in
// carriedMetadata that d does not set, and says whether it was created,
// updated or left unchanged (the server keeps the version of a write that
// changes nothing).
func applyOne(ctx context.Context, client pbresource.ResourceServiceClient, d document) (*pbresource.Resource, string, error) {
	consistent := metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	res := proto.Clone(d.res).(*pbresource.Resource)
	var stored *pbresource.Resource
	read, err := client.Read(consistent, &pbresource.ReadRequest{Id: &pbresource.ID{Type: res.Id.Type, Tenancy: res.Id.Tenancy, Name: res.Id.Name}})
	switch {
	case status.Code(err) == codes.NotFound:
	case err != nil:
		return nil, "", err
	default:
		stored = read.Resource
		for _, k := range carriedMetadata {
			if v, ok := stored.Metadata[k]; ok && !d.setMeta[k] {
				if res.Metadata == nil {
					res.Metadata = map[string]string{}
				}
				res.Metadata[k] = v
			}
		}
	}
	resp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res})
	if err != nil {
		return nil, "", err
	}
	out := resp.Resource
	switch {
	case stored == nil || stored.Id.Uid != out.Id.Uid:
		return out, "created", nil
	case stored.Version == out.Version:
		return out, "unchanged", nil
	default:
		return out, "updated", nil
	}
}

// validateConcurrency is how many MutateAndValidate calls apply makes at
// once.
const validateConcurrency = 8

// validateAll runs MutateAndValidate on every document, a few at a time,
// and returns the resources as the server's hooks left them. Its error
// names the first document (in file order) the server refused, or is the
// server's Unimplemented.
func validateAll(ctx context.Context, client pbresource.ResourceServiceClient, docs []document) ([]*pbresource.Resource, error) {
	checked := make([]*pbresource.Resource, len(docs))
	errs := make([]error, len(docs))
	sem := make(chan struct{}, validateConcurrency)
	var wg sync.WaitGroup
	for i, d := range docs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			resp, err := client.MutateAndValidate(ctx, &pbresource.MutateAndValidateRequest{Resource: d.res})
			if err != nil {
				errs[i] = err
				return
			}
			checked[i] = resp.Resource
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if status.Code(err) == codes.Unimplemented {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: nothing was written", docs[i].source, errorText(err))
		}
	}
	return checked, nil
}

func resources(docs []document) []*pbresource.Resource {
	out := make([]*pbresource.Resource, len(docs))
	for i, d := range docs {
		out[i] = d.res
	}
	return out
}
