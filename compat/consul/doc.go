// Package consul holds the tests that link Loom with Consul's generated
// resource types (github.com/hashicorp/consul/proto-public) and show they
// interoperate. It is a module of its own so that Loom's root module does
// not depend on Consul's.
package consul
