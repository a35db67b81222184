package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/loomrt/loom/proto/pbresource"
)

// typeResolver finds the message types of resources' data, so they can be
// read from and printed as JSON or YAML without being compiled into loom.
// It looks in this order:
//
//  1. the -protoset file, when given (the user's explicit choice);
//  2. the server, through gRPC server reflection (Loom serves it);
//  3. the types compiled into loom: Loom's own (a Tombstone), protobuf's
//     well-known types, and the example types of `loom server`.
//
// Types found in 1 and 2 are dynamicpb messages. It implements the resolver
// interfaces protojson wants; lookups may block on the server (bounded by
// the command's context).
type typeResolver struct {
	ctx      context.Context
	conn     grpc.ClientConnInterface
	protoset *protoregistry.Files // nil without -protoset
	// perRequest bounds each reflection request (0: only ctx does).
	perRequest time.Duration

	mu sync.Mutex
	// fetched holds every file the server described, by name; files is
	// built from them.
	fetched  map[string]*descriptorpb.FileDescriptorProto
	files    *protoregistry.Files
	noServer error                           // why reflection cannot be used, once known
	failed   map[protoreflect.FullName]error // names the server could not describe
}

func newTypeResolver(ctx context.Context, conn grpc.ClientConnInterface, protosetFile string, perRequest time.Duration) (*typeResolver, error) {
	r := &typeResolver{ctx: ctx, conn: conn, perRequest: perRequest, fetched: map[string]*descriptorpb.FileDescriptorProto{}}
	if protosetFile != "" {
		files, err := loadProtoset(protosetFile)
		if err != nil {
			return nil, usageError{Err: err}
		}
		r.protoset = files
	}
	return r, nil
}

// loadProtoset reads a FileDescriptorSet, as protoc --descriptor_set_out
// (with --include_imports) and buf build -o write it.
func loadProtoset(path string) (*protoregistry.Files, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-protoset: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("-protoset %s is not a FileDescriptorSet: %w", path, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("-protoset %s: %w (was it made with --include_imports?)", path, err)
	}
	return files, nil
}

// unresolvedError says which type was not found and both ways out.
type unresolvedError struct {
	name   protoreflect.FullName
	server error // why the server could not say, when it could not
}

func (e *unresolvedError) Error() string {
	why := "the server does not know it"
	if e.server != nil {
		why = "the server's reflection failed: " + errorText(e.server)
	}
	return fmt.Sprintf("message type %s cannot be resolved (%s); turn on the server's gRPC reflection "+
		"(Loom's -reflection) or give -protoset FILE, a FileDescriptorSet of its .proto files "+
		"(protoc --include_imports --descriptor_set_out=FILE ...)", e.name, why)
}

func (e *unresolvedError) Unwrap() error { return protoregistry.NotFound }

// errorText is a gRPC status's code and message, or err's text.
func errorText(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

// FindMessageByURL returns the message type of an Any's type URL.
func (r *typeResolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	name := url
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		name = url[i+1:]
	}
	return r.FindMessageByName(protoreflect.FullName(name))
}

// FindMessageByName returns the message type of the given full name.
func (r *typeResolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if r.protoset != nil {
		if mt, err := messageIn(r.protoset, name); err == nil {
			return mt, nil
		}
	}
	mt, serverErr := r.fromServer(name)
	if serverErr == nil {
		return mt, nil
	}
	if mt, err := pbresource.Resolver.FindMessageByName(name); err == nil {
		return mt, nil
	}
	if errors.Is(serverErr, protoregistry.NotFound) {
		serverErr = nil
	}
	return nil, &unresolvedError{name: name, server: serverErr}
}

// FindExtensionByName returns the extension of the given name.
func (r *typeResolver) FindExtensionByName(name protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return pbresource.Resolver.FindExtensionByName(name)
}

// FindExtensionByNumber returns the extension of message with number num.
func (r *typeResolver) FindExtensionByNumber(message protoreflect.FullName, num protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return pbresource.Resolver.FindExtensionByNumber(message, num)
}

func messageIn(files *protoregistry.Files, name protoreflect.FullName) (protoreflect.MessageType, error) {
	d, err := files.FindDescriptorByName(name)
	if err != nil {
		return nil, err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a message: %w", name, protoregistry.NotFound)
	}
	return dynamicpb.NewMessageType(md), nil
}

// fromServer finds name in the files the server describes, asking it for
// the file that defines name (and those it imports) when needed. It returns
// protoregistry.NotFound when the server does not know name. A failure is
// remembered, so a list of many resources of one type asks only once.
func (r *typeResolver) fromServer(name protoreflect.FullName) (protoreflect.MessageType, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files != nil {
		if mt, err := messageIn(r.files, name); err == nil {
			return mt, nil
		}
	}
	if r.noServer != nil {
		return nil, r.noServer
	}
	if err, ok := r.failed[name]; ok {
		return nil, err
	}
	mt, err := r.fetch(name)
	if err != nil {
		if r.failed == nil {
			r.failed = map[protoreflect.FullName]error{}
		}
		r.failed[name] = err
	}
	return mt, err
}

func (r *typeResolver) fetch(name protoreflect.FullName) (protoreflect.MessageType, error) {
	protos, err := r.reflect(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: string(name)},
	})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
			return nil, protoregistry.NotFound
		}
		// No reflection (Unimplemented), no server, no permission: asking
		// again for the next type would fail the same way.
		r.noServer = err
		return nil, err
	}
	r.add(protos)
	// A server may leave imports out (one it sent before on the same
	// stream, or one its own registry describes only by path): ask for
	// each by name, then look among the compiled-in files.
	for missing := r.missingImports(); len(missing) > 0; missing = r.missingImports() {
		for _, path := range missing {
			protos, err := r.reflect(&reflectionpb.ServerReflectionRequest{
				MessageRequest: &reflectionpb.ServerReflectionRequest_FileByFilename{FileByFilename: path},
			})
			if err == nil && len(protos) > 0 {
				r.add(protos)
				continue
			}
			fd, ferr := pbresource.Resolver.FindFileByPath(path)
			if ferr != nil || fd.IsPlaceholder() {
				return nil, fmt.Errorf("%s imports %s, which the server does not describe", name, path)
			}
			r.add([]*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(fd)})
		}
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range r.fetched {
		set.File = append(set.File, fd)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("the server's descriptors of %s do not build: %w", name, err)
	}
	r.files = files
	return messageIn(files, name)
}

func (r *typeResolver) add(protos []*descriptorpb.FileDescriptorProto) {
	for _, fd := range protos {
		r.fetched[fd.GetName()] = fd
	}
}

// missingImports lists the files imported by fetched files but not fetched.
func (r *typeResolver) missingImports() []string {
	var missing []string
	for _, fd := range r.fetched {
		for _, dep := range fd.GetDependency() {
			if _, ok := r.fetched[dep]; !ok && !slices.Contains(missing, dep) {
				missing = append(missing, dep)
			}
		}
	}
	return missing
}

// reflect sends one request to the server's reflection service and
// returns the file descriptors of its answer. It asks v1, then v1alpha
// (older servers serve only that) when v1 is Unimplemented.
func (r *typeResolver) reflect(req *reflectionpb.ServerReflectionRequest) ([]*descriptorpb.FileDescriptorProto, error) {
	ctx, cancel := context.WithCancel(r.ctx) // ends the streams
	defer cancel()
	if r.perRequest > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, r.perRequest)
		defer cancelTimeout()
	}
	resp, err := reflectV1(ctx, r.conn, req)
	if status.Code(err) == codes.Unimplemented {
		resp, err = reflectV1alpha(ctx, r.conn, req)
	}
	if err != nil {
		return nil, err
	}
	if e := resp.GetErrorResponse(); e != nil {
		return nil, status.Error(codes.Code(e.GetErrorCode()), e.GetErrorMessage())
	}
	var out []*descriptorpb.FileDescriptorProto
	for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(b, fd); err != nil {
			return nil, fmt.Errorf("the server's reflection sent a bad file descriptor: %w", err)
		}
		out = append(out, fd)
	}
	return out, nil
}

func reflectV1(ctx context.Context, conn grpc.ClientConnInterface, req *reflectionpb.ServerReflectionRequest) (*reflectionpb.ServerReflectionResponse, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	// A Send that finds the stream already ended by the server returns
	// io.EOF; the server's status (Unimplemented, say) is Recv's.
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	_ = stream.CloseSend()
	return resp, err
}

// reflectV1alpha asks v1alpha, whose messages are v1's on the wire.
func reflectV1alpha(ctx context.Context, conn grpc.ClientConnInterface, req *reflectionpb.ServerReflectionRequest) (*reflectionpb.ServerReflectionResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	alphaReq := new(reflectionv1alpha.ServerReflectionRequest)
	if err := proto.Unmarshal(b, alphaReq); err != nil {
		return nil, err
	}
	stream, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(alphaReq); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	alphaResp, err := stream.Recv()
	_ = stream.CloseSend()
	if err != nil {
		return nil, err
	}
	if b, err = proto.Marshal(alphaResp); err != nil {
		return nil, err
	}
	resp := new(reflectionpb.ServerReflectionResponse)
	return resp, proto.Unmarshal(b, resp)
}
