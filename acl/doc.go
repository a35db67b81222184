// Package acl reads an ACL file, which maps tokens to rules, and resolves
// the token a caller presents to what it may do: a resource.Authorizer for
// server.Config.ACLResolver.
//
// The file is YAML (JSON is YAML too):
//
//	tokens:
//	  - name: bar-controller
//	    secret: "7d1c0f3e-example"
//	    rules:
//	      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
//	      - {type: "foo.v1.Zip", partition: "default", namespace: "*", access: read}
//	  - name: viewer
//	    secret: "0b9e55a2-example"
//	    rules:
//	      - {type: "foo.*.*", partition: "*", namespace: "*", access: list}
//	      - {type: "foo.*.*", partition: "*", namespace: "*", access: read}
//
// A rule's type is a group.version.kind pattern where any part may be "*";
// its partition and namespace are a name or "*". A tenancy unit the type
// does not have (a cluster-scoped type has neither) is matched only by "*".
// Its access is read, list or write; write implies the other two. A token
// may do what any of its rules allows, and nothing else: with ACLs on,
// everything is denied by default. A viewer needs both list and read, as
// above: a List or WatchList returns only the resources the token may
// read, so list alone sees nothing (`loom list` says so).
//
// A rule may instead grant a capability, something other than access to
// resources, and then has no other field:
//
//	tokens:
//	  - name: leader-controllers
//	    secret: "0a9e4c2d-example"
//	    rules:
//	      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
//	      - {capability: fence}
//	  - name: grpcurl
//	    secret: "5b3f8e1a-example"
//	    rules:
//	      - {capability: reflection}
//
// "fence" lets the token present a fencing token (the x-loom-fence
// metadata) on its writes, as the singleton controllers of a process
// holding an etcd leader lease do; a write that carries one without it is
// PermissionDenied. "reflection" lets it use gRPC server reflection
// (grpcurl list, describe), which is Unauthenticated without a token and
// PermissionDenied without the capability. "restore" lets it import
// resources as exported (loom import -preserve: the Uids, owners, finalizers
// and statuses given), which is PermissionDenied without it, whatever
// access the token has. Calls made in process by a
// host's own controllers need neither.
//
// Callers present their token in the x-consul-token gRPC metadata, which is
// what Consul's clients send. No token, or one the file does not name, is
// Unauthenticated; a known token without the access is PermissionDenied
// (the server's doing, through the Authorizer). Secrets are compared in
// constant time and never appear in errors or logs; a token is named by its
// name.
package acl
