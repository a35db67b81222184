package resource

// TokenMetadataKey is the gRPC metadata key in which a caller presents its
// ACL token: the one Consul's clients send, so they work against a Loom
// server with ACLs on (see package acl), and Loom's against Consul.
const TokenMetadataKey = "x-consul-token"
