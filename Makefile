# Loom's build entry points. `make test` is what CI runs.

GO ?= go
# Every Go module in the tree; go.work ties them together for development.
MODULES := . cmd/loom host storage/etcd compat/consul examples/hello

# Code generation needs nothing installed but Go: `loom generate` compiles
# the .proto files with a pure-Go compiler and runs protoc-gen-go in process;
# gRPC stubs come from the pinned protoc-gen-go-grpc, run with `go run`.
# cmd/loom's go.mod pins protoc-gen-go (google.golang.org/protobuf), and
# cmd/loom's TestGenerateReproducesCommittedFiles checks the committed files
# are what this produces. pbpatch then makes resource.pb.go register in
# Loom's own protobuf registry rather than the global one, so Consul's
# pbresource can be linked beside it (see proto/pbresource's package doc).
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
BIN := $(CURDIR)/.bin
LOOM_GENERATE = $(GO) run ./cmd/loom generate -grpc-plugin "$(GO) run google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)"

PROTO_FILES := proto/pbresource/resource.proto \
	proto/pblease/v1/lease.proto \
	proto/pbhistory/v1/history.proto \
	proto/pbbulk/v1/bulk.proto \
	proto/pbcatalog/v1/catalog.proto \
	examples/foo/pbfoo/v1/foo.proto \
	examples/foo/pbfoo/v2/foo.proto \
	examples/hello/pbhello/v1/hello.proto

BENCH ?= .
BENCHCOUNT ?= 5

.PHONY: all build loom test vet proto bench bench-compare dev fuzz robustness test-cluster console-screenshots

all: build

build:
	@for m in $(MODULES); do (cd $$m && $(GO) build ./...) || exit 1; done

# The loom binary (CLI and server) in .bin, stamped with the checkout's VCS
# revision for `loom version` and loom_build_info: builds in a go.work
# workspace are not stamped unless asked (-buildvcs=true).
loom:
	cd cmd/loom && $(GO) build -buildvcs=true -o $(BIN)/loom .

vet:
	@for m in $(MODULES); do echo "== go vet ./... in $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

# The race detector needs cgo, hence a C compiler. Where there is none, the
# tests still run, without -race and with a warning; in CI that is an error.
RACE := $(if $(filter 1,$(shell $(GO) env CGO_ENABLED)),-race,)

# The web console's browser tests (host) drive a headless Chromium; without
# one they are skipped with a warning, and in CI that is an error.
CHROMIUM := $(shell command -v chromium || command -v chromium-browser || command -v google-chrome)

test: vet
	@if [ -z "$(RACE)" ]; then \
		echo "warning: cgo is off (no C compiler found?): running the tests WITHOUT -race; install gcc to enable it" >&2; \
		if [ -n "$$CI" ]; then echo "error: CI must run the tests with -race" >&2; exit 1; fi; \
	fi
	@if [ -z "$(CHROMIUM)" ]; then \
		echo "warning: no Chromium found: the web console's browser tests are skipped; apt-get install -y chromium to run them" >&2; \
		if [ -n "$$CI" ]; then echo "error: CI must run the browser tests (apt-get install -y chromium)" >&2; exit 1; fi; \
	fi
	@total=$$(date +%s); for m in $(MODULES); do \
		echo "== go test $(RACE) ./... in $$m"; start=$$(date +%s); \
		(cd $$m && $(GO) test $(RACE) -count=1 ./...) || { echo "== $$m FAILED after $$(( $$(date +%s) - start ))s"; exit 1; }; \
		echo "== $$m passed in $$(( $$(date +%s) - start ))s"; \
	done; echo "== all modules passed in $$(( $$(date +%s) - total ))s"

# Fuzzing: every fuzz test, FUZZTIME each, one after another (go test
# fuzzes one test at a time). New failures land in the package's
# testdata/fuzz, which is committed; `make test` replays the corpora.
FUZZTIME ?= 30s
FUZZ_SERVER := FuzzWrite FuzzRead FuzzWriteStatus FuzzList FuzzListByOwner FuzzDelete FuzzWatchList FuzzMutateAndValidate
FUZZ_ETCD := FuzzUnmarshalResource
FUZZ_SELECTOR := FuzzParse

fuzz:
	@for f in $(FUZZ_SERVER); do (cd server && $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) .) || exit 1; done
	@for f in $(FUZZ_ETCD); do (cd storage/etcd && $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) .) || exit 1; done
	@for f in $(FUZZ_SELECTOR); do (cd selector && $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) .) || exit 1; done

# The long robustness run (internal/testkit/robustness): more clients, names and
# operations than the short run of `make test`, over ROBUSTNESS_SEEDS seeds
# from ROBUSTNESS_SEED (random when empty), on the in-memory backend and on
# the embedded etcd. A failure prints the seed; `-robustness.seed=N` replays it.
ROBUSTNESS_SEEDS ?= 5
ROBUSTNESS_SEED ?=
ROBUSTNESS_FLAGS = -robustness.long -robustness.seeds=$(ROBUSTNESS_SEEDS) $(if $(ROBUSTNESS_SEED),-robustness.seed=$(ROBUSTNESS_SEED),)

robustness:
	$(GO) test $(RACE) -count=1 -timeout 30m -v -run 'TestInMemory' ./internal/testkit/robustness/ $(ROBUSTNESS_FLAGS)
	cd storage/etcd && $(GO) test $(RACE) -count=1 -timeout 30m -v -run 'TestRobustness' . $(ROBUSTNESS_FLAGS)

# The multi-process test of Loom on etcd: a 3-member etcd cluster and 3
# `loom server -storage etcd` processes on loopback, the leading server and
# etcd's leader killed, then the next leader frozen, while a client writes;
# and the porcupine-checked history across 3 servers under such faults
# (storage/etcd/clustertest). Not part of `make test`; it builds the binaries
# itself and needs nothing installed but Go.
test-cluster:
	cd storage/etcd && $(GO) vet -tags cluster ./clustertest/ && $(GO) test -tags cluster -count=1 -timeout 10m -v ./clustertest/

dev:
	$(GO) run ./cmd/loom server -dev

# The screenshots of the web console in docs/, taken by its browser tests.
console-screenshots:
	cd host && LOOM_CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run 'TestConsoleBrowser' .

proto:
	$(LOOM_GENERATE) -I proto -out proto -grpc pbresource/resource.proto
	$(GO) run ./proto/internal/pbpatch proto/pbresource/resource.pb.go
	$(LOOM_GENERATE) -I proto -out proto pblease/v1/lease.proto
	$(LOOM_GENERATE) -I proto -out proto -grpc pbhistory/v1/history.proto pbbulk/v1/bulk.proto pbcatalog/v1/catalog.proto
	$(LOOM_GENERATE) -I proto -I . -out . examples/foo/pbfoo/v1/foo.proto examples/foo/pbfoo/v2/foo.proto
	$(MAKE) -C examples/hello proto LOOM="$(GO) run $(CURDIR)/cmd/loom"

# Benchmarks: the workloads of docs/performance.md that live in the root
# module (W1-W8), several counts, then bench-compare. W9, the etcd backend,
# is in the storage/etcd module: run it there (see docs/performance.md).
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(BENCHCOUNT) ./...
	$(MAKE) bench-compare

# The same workloads on the peers (client-go's workqueue and Indexer), side
# by side with Loom's in one process; benchmarks/ is its own module.
bench-compare:
	cd benchmarks && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(BENCHCOUNT) ./...
