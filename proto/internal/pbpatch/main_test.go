package main

import (
	"os"
	"strings"
	"testing"
)

// generated is the shape of protoc-gen-go v1.36's init function.
const generated = `package p

func file_p_proto_init() {
	type x struct{}
	out := protoimpl.TypeBuilder{
		File: protoimpl.DescBuilder{
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			NumMessages:   1,
		},
		GoTypes: file_p_proto_goTypes,
	}.Build()
	_ = out
}
`

const want = `package p

func file_p_proto_init() {
	type x struct{}
	out := protoimpl.TypeBuilder{
		TypeRegistry: typeRegistry, // the package's own, not protoregistry.GlobalTypes
		File: protoimpl.DescBuilder{
			FileRegistry:  fileRegistry, // the package's own, not protoregistry.GlobalFiles
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			NumMessages:   1,
		},
		GoTypes: file_p_proto_goTypes,
	}.Build()
	_ = out
}
`

func TestPatch(t *testing.T) {
	got, err := patch([]byte(generated))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("patched:\n%s\nwant:\n%s", got, want)
	}
	again, err := patch(got)
	if err != nil || string(again) != want {
		t.Errorf("patching twice changed the file (%v):\n%s", err, again)
	}
}

// The committed resource.pb.go is patched: pbpatch leaves it as it is.
func TestResourcePBIsPatched(t *testing.T) {
	src, err := os.ReadFile("../../pbresource/resource.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := patch(src)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(src) {
		t.Error("proto/pbresource/resource.pb.go is not patched: run make proto")
	}
}

func TestPatchRefusesUnexpectedShapes(t *testing.T) {
	for name, src := range map[string]string{
		"no DescBuilder":   strings.Replace(generated, "File: protoimpl.DescBuilder{", "File: other.DescBuilder{", 1),
		"no TypeBuilder":   strings.Replace(generated, "out := protoimpl.TypeBuilder{", "out := other.TypeBuilder{", 1),
		"two files":        generated + strings.TrimPrefix(generated, "package p\n"),
		"its own registry": strings.Replace(generated, "GoTypes:", "TypeRegistry: r,\n\t\tGoTypes:", 1),
	} {
		if _, err := patch([]byte(src)); err == nil {
			t.Errorf("%s: patch succeeded, want an error", name)
		}
	}
}
