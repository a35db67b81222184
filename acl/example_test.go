package acl_test

import (
	"fmt"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// A host turns ACLs on with a file: acl.NewSource(path, logger), then
// server.Config{ACLResolver: src.Resolve} and go src.Run(ctx, 0) to reload
// it. Here, a policy parsed from memory answers for one token.
func ExampleParse() {
	p, err := acl.Parse("acl.yaml", []byte(`
tokens:
  - name: bar-controller
    secret: "7d1c0f3e-example"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
      - {type: "foo.v1.Zip", partition: "default", namespace: "*", access: read}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := p.Token("7d1c0f3e-example")
	zip := &pbresource.ID{
		Type:    &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Zip"},
		Tenancy: &pbresource.Tenancy{Partition: "default"},
		Name:    "z",
	}
	fmt.Println(a.Name(), "reads a Zip:", a.Allowed(resource.AccessRead, zip))
	fmt.Println(a.Name(), "writes a Zip:", a.Allowed(resource.AccessWrite, zip))
	// Output:
	// bar-controller reads a Zip: true
	// bar-controller writes a Zip: false
}
