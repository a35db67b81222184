package etcd

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ).
const clockTicks = 100

// etcdCPU returns the CPU time (user and system) the test etcd process has
// used so far, at a resolution of 10 ms, or 0 if it cannot be read.
func etcdCPU() time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(etcdPid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command (which is in parentheses) start with
	// the state, field 3; utime and stime are fields 14 and 15.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// BenchmarkW9History is W9's writes with history (storage.Historian) on
// next to off, in the same run (benchutil.OnOff), each on a started
// backend (so the pruner runs). The CPU counts this process (the client
// side) and the etcd process: issue 23's budget is cpu-ratio <= 1.15.
// Every update changes the Generation, so every write is recorded.
func BenchmarkW9History(b *testing.B) {
	ctx := context.Background()
	cpu := func() time.Duration { return benchutil.CPUTime() + etcdCPU() }
	started := func(opt Option) *Backend {
		be := New(testClient, WithPrefix(newPrefix()), opt)
		stop, err := be.Start(ctx)
		must(b, err)
		b.Cleanup(stop)
		return be
	}

	b.Run("op=write-create", func(b *testing.B) {
		create := func(be *Backend) func(int) {
			in := benchResource("")
			return func(i int) {
				in.Id.Name = benchName(i)
				_, err := be.WriteCAS(ctx, in)
				must(b, err)
			}
		}
		benchutil.OnOff(b, 64, cpu, create(started(WithHistory(storage.HistoryLimits{}))), create(started(WithoutHistory())))
	})

	b.Run("op=write-update", func(b *testing.B) {
		update := func(be *Backend) func(int) {
			stored, err := be.WriteCAS(ctx, benchResource("w"))
			must(b, err)
			in := proto.Clone(stored).(*pbresource.Resource)
			return func(int) {
				in.Generation = ulid.Make().String()
				out, err := be.WriteCAS(ctx, in)
				must(b, err)
				in.Version = out.Version
			}
		}
		benchutil.OnOff(b, 64, cpu, update(started(WithHistory(storage.HistoryLimits{}))), update(started(WithoutHistory())))
	})
}
