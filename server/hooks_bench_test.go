package server

import (
	"context"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
)

// BenchmarkWriteHooked measures a Write of the example foo.v1.Bar, whose
// type has a Mutate hook (it lower-cases baz) and a Validate hook, through
// the in-process client: "update" alternates between two payloads, so every
// Write stores a change; "mutated" sends an upper-case baz the hook must
// change, alternating too; "no-op" writes the same resource again, which
// the service must find unchanged (no write, same version).
func BenchmarkWriteHooked(b *testing.B) {
	for _, op := range []string{"update", "mutated", "no-op"} {
		b.Run(op, func(b *testing.B) {
			env := newEnv(b)
			ctx := context.Background()
			payloads := map[string][2]string{
				"update":  {"some bar data, version 0", "some bar data, version 1"},
				"mutated": {"Some Bar Data, Version 0", "Some Bar Data, Version 1"},
				"no-op":   {"some bar data", "some bar data"},
			}[op]
			var reqs [2]*pbresource.WriteRequest
			for i, baz := range payloads {
				reqs[i] = &pbresource.WriteRequest{Resource: bar(b, "b", baz)}
			}
			first, err := env.client.Write(ctx, reqs[0])
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := env.client.Write(ctx, reqs[(i+1)%2]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if op == "no-op" && env.mustRead(b, first.Resource.Id).Version != first.Resource.Version {
				b.Fatal("a no-op write changed the version")
			}
		})
	}
}
