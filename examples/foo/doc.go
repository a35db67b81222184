// Package foo is Loom's worked example: a handful of small resource types,
// their registration with Mutate and Validate hooks, and (later) a controller
// that reconciles them.
//
// The dev server (`loom server -dev`) registers these types, so they are also
// what the README's grpcurl walk-through writes and reads.
//
//	type          data message                 scope      hooks
//	foo.v1.Bar    loom.example.foo.v1.Bar      namespace  Mutate + Validate
//	foo.v2.Bar    loom.example.foo.v2.Bar      namespace  Mutate + Validate
//	foo.v1.Zip    loom.example.foo.v1.Zip      partition  none
//	foo.v1.Qux    loom.example.foo.v1.Qux      cluster    none
package foo
