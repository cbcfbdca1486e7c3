# purerdma: see README.md and docs/testing.md.
#
#   make demo                 boot the soft-RoCE VM and run the end-to-end demo
#   make test                 lint + host tests + every package's tests in the VM on both kernels
#   make vmtest KERNEL=6.12   every package's tests in the VM on one kernel
#   make lint                 gofmt, go vet, CGO_ENABLED=0 build, shell syntax, layering check
#   make bench                benchmarks in one VM boot per kernel

GO      ?= go
KERNELS ?= 6.1 6.12
KERNEL  ?= 6.1
# Extra go test flags, e.g. make vmtest TESTFLAGS='-run TestDevices -v'.
TESTFLAGS ?=
BIN     := $(CURDIR)/bin

.PHONY: all test deps lint unit vmtest vmtest-all bench demo tools examples clean

all: lint tools

deps:
	@scripts/install-deps

tools:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/...

# The rpma examples, as users build them, for the VM tests of
# rpma/examples (building inside the emulated VM takes minutes each).
EXAMPLES_BIN := $(BIN)/examples
examples:
	@mkdir -p $(EXAMPLES_BIN)
	@for d in rpma/examples/*/server rpma/examples/*/client; do \
	  [ -d "$$d" ] || continue; \
	  ex=$$(basename $$(dirname $$d)); side=$$(basename $$d); \
	  CGO_ENABLED=0 $(GO) build -o $(EXAMPLES_BIN)/$$ex-$$side ./$$d || exit 1; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v testdata/)); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...
	@for f in scripts/* .ci/run; do bash -n "$$f" || exit 1; done
	$(GO) test -count=1 ./internal/layering

# Host tests: no RDMA here, so device tests skip (PURERDMA_REQUIRE_DEVICE is
# cleared for this phase only); the runner's own VM tests must run.
unit: deps examples
	env -u PURERDMA_REQUIRE_DEVICE PURERDMA_TEST_RXEVM=1 PURERDMA_TEST_ABI=1 $(GO) test -count=1 $(TESTFLAGS) ./...

# Every package's tests inside the VM, where device tests must not skip;
# the host-only source checks (layering, the ABI against the C headers)
# ran in make unit and would only boot a VM to skip.
HOSTONLY := internal/layering internal/abi internal/cmd/genabi cmd/rxevm testenv/vm
VMPKGS = $(shell $(GO) list ./... | grep -v $(foreach p,$(HOSTONLY),-e /$(p)))
vmtest: deps examples
	PURERDMA_EXAMPLES_BIN=$(EXAMPLES_BIN) PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) $(VMPKGS)

vmtest-all:
	@set -e; for k in $(KERNELS); do $(MAKE) --no-print-directory vmtest KERNEL=$$k; done

test: deps lint unit vmtest-all

# perftest's C tools and purerdma bench side by side (scripts/bench), then
# C librpma and the rpma package (scripts/bench-rpma, in a boot of its
# own: each takes 15-35 minutes), per kernel; docs/performance.md has the
# method and results.
bench: deps tools
	@set -e; for k in $(KERNELS); do \
	  $(BIN)/rxevm -kernel $$k -timeout 20m -- $(CURDIR)/scripts/bench; \
	  $(BIN)/rxevm -kernel $$k -timeout 60m -- $(CURDIR)/scripts/bench-rpma; \
	done

demo: deps tools
	$(BIN)/rxevm -kernel $(KERNEL) -- $(CURDIR)/scripts/demo

clean:
	rm -rf $(BIN)
