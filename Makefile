# Loom's build entry points. `make test` is what CI runs.

GO ?= go
# Every Go module in the tree; go.work ties them together for development.
MODULES := . cmd/loom

# Pinned code generators, so `make proto` reproduces the committed files byte
# for byte (with Debian's protoc 3.21.12: apt-get install protobuf-compiler).
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
BIN := $(CURDIR)/.bin

PROTO_FILES := proto/pbresource/resource.proto \
	examples/foo/pbfoo/v1/foo.proto \
	examples/foo/pbfoo/v2/foo.proto

BENCH ?= .
BENCHCOUNT ?= 5

.PHONY: all build test vet proto bench dev fuzz

all: build

build:
	@for m in $(MODULES); do (cd $$m && $(GO) build ./...) || exit 1; done

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

test: vet
	@for m in $(MODULES); do (cd $$m && $(GO) test -race -count=1 ./...) || exit 1; done

dev:
	$(GO) run ./cmd/loom server -dev

$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	protoc -I proto -I . \
		--plugin=protoc-gen-go=$(BIN)/protoc-gen-go \
		--plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=paths=source_relative:proto \
		--go-grpc_out=paths=source_relative:proto \
		pbresource/resource.proto
	protoc -I proto -I . \
		--plugin=protoc-gen-go=$(BIN)/protoc-gen-go \
		--go_out=paths=source_relative:. \
		examples/foo/pbfoo/v1/foo.proto examples/foo/pbfoo/v2/foo.proto

# Benchmarks: every workload of shared/BENCHMARKS.md, several counts.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(BENCHCOUNT) ./...
