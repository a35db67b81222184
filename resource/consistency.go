package resource

// ConsistencyModeKey is the gRPC metadata key a caller of Read sets to
// ConsistencyModeConsistent to ask for a linearizable result. It is the key
// Consul's clients send, so they work against a Loom server unchanged.
const ConsistencyModeKey = "x-consul-consistency-mode"

// ConsistencyModeConsistent is the value of ConsistencyModeKey that asks for
// strong consistency.
const ConsistencyModeConsistent = "consistent"
