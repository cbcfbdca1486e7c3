# purerdma: see README.md and docs/testing.md.
#
#   make demo                 boot the soft-RoCE VM and run the end-to-end demo (KERNEL=6.12 for 6.12)
#   make test                 lint + host tests + fuzzing + every package's tests in the VM on both kernels
#   make vmtest KERNEL=6.12   every package's tests in the VM on one kernel
#   make vmrace KERNEL=6.12   the concurrency tests built with -race, in the VM on one kernel
#   make fuzz                 every fuzz target for FUZZTIME (10s) each
#   make lint                 gofmt, go vet, CGO_ENABLED=0 build, shell syntax, layering check
#   make bench                benchmarks in one VM boot per kernel
#   make vmtest-peer          the two-VM bed's tests (rxevm -peer), 6.1 beside 6.12 and back
#   make vmtest-bed           the bed's cross-host suites and fault table, 6.1 beside 6.12 (part of make test)

GO      ?= go
KERNELS ?= 6.1 6.12
KERNEL  ?= 6.1
# Extra go test flags, e.g. make vmtest TESTFLAGS='-run TestDevices -v'.
TESTFLAGS ?=
BIN     := $(CURDIR)/bin

.PHONY: all test deps lint unit fuzz vmtest vmrace vmtest-all emptyroot bench demo tools examples clean

all: lint tools

deps:
	@scripts/install-deps

tools:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/...

# The rpma examples, as users build them, for the VM tests of
# rpma/examples (building inside the emulated VM takes minutes each),
# and docs/getting-started.md's programs for examples/'s.
# The log example takes no arguments, so it goes apart from the
# client-server ones, which TestExampleUsage runs without arguments.
EXAMPLES_BIN := $(BIN)/examples
examples:
	@mkdir -p $(EXAMPLES_BIN)
	@for d in rpma/examples/*/server rpma/examples/*/client; do \
	  [ -d "$$d" ] || continue; \
	  ex=$$(basename $$(dirname $$d)); side=$$(basename $$d); \
	  CGO_ENABLED=0 $(GO) build -o $(EXAMPLES_BIN)/$$ex-$$side ./$$d || exit 1; \
	done
	@mkdir -p $(EXAMPLES_BIN)-noargs
	@CGO_ENABLED=0 $(GO) build -o $(EXAMPLES_BIN)-noargs/log ./rpma/examples/log
	@mkdir -p $(EXAMPLES_BIN)-first
	@CGO_ENABLED=0 $(GO) build -o $(EXAMPLES_BIN)-first/ ./examples/first-verbs ./examples/first-rdmacm ./examples/first-rpma ./examples/first-rsocket
	@# The manual's examples (uverbs/examples, rdmacm/examples), for their VM tests.
	@mkdir -p $(EXAMPLES_BIN)-manual
	@CGO_ENABLED=0 $(GO) build -o $(EXAMPLES_BIN)-manual/ ./uverbs/examples/rc-example ./rdmacm/examples/mckey ./rdmacm/examples/apm ./rdmacm/examples/mc ./rdmacm/examples/srq

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v testdata/)); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags purerdma_peer ./cmd/purerdma ./rpma/examples ./internal/faults
	CGO_ENABLED=0 $(GO) build ./...
	# The race build's frames are larger: a //go:nosplit chain the linker
	# refuses there would otherwise fail only make vmrace, late in the run.
	$(GO) test -race -c -o /dev/null ./uverbs
	@for f in scripts/* .ci/run; do bash -n "$$f" || exit 1; done
	$(GO) test -count=1 ./internal/layering

# Host tests: no RDMA here, so device tests skip (PURERDMA_REQUIRE_DEVICE is
# cleared for this phase only); the runner's own VM tests must run.
unit: deps examples
	env -u PURERDMA_REQUIRE_DEVICE PURERDMA_TEST_RXEVM=1 PURERDMA_TEST_ABI=1 $(GO) test -count=1 $(TESTFLAGS) ./...

# Every package's tests inside the VM, where device tests must not skip,
# then the gRPC example's (a module of its own: rsocket/examples/grpc);
# the host-only source checks (layering, the ABI against the C headers)
# ran in make unit and would only boot a VM to skip, and the packages
# whose tests touch no device and no kernel interface (pure Go: rings,
# codecs, statistics, fakes) ran there too and would only boot a VM to
# run the same again.
HOSTONLY := internal/layering internal/abi internal/cmd/genabi internal/cmd/genviews internal/cmd/racetests internal/cmd/modroot cmd/purerdma/internal/cli cmd/purerdma/internal/devs cmd/purerdma/internal/devices cmd/purerdma/internal/riostream cmd/purerdma/internal/progress uverbs/internal/mlx5 cmd/rxevm testenv/vm uverbs/internal/siw uverbs/internal/rxe uverbs/internal/provider uverbs/examples/rc-example rdmacm/examples/internal/clike internal/testutils internal/bench mmio rpma/examples/internal/common rpma/examples/internal/gpspm
VMPKGS = $(shell $(GO) list ./... | grep -v $(foreach p,$(HOSTONLY),-e /$(p)))
vmtest: deps examples
	PURERDMA_EXAMPLES_BIN=$(EXAMPLES_BIN) PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) $(VMPKGS)
	cd rsocket/examples/grpc && PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) ./...
	PURERDMA_FABRIC=siw PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) $(SIWPKGS)
	PURERDMA_FABRIC=siw PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) -run '$(SIWCMDRUN)' $(SIWCMDPKGS)
	PURERDMA_EXAMPLES_BIN=$(EXAMPLES_BIN) PURERDMA_FABRIC=siw PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) -run '$(SIWEXRUN)' ./rpma/examples
	PURERDMA_EXAMPLES_BIN=$(EXAMPLES_BIN) PURERDMA_FABRIC=siw PURERDMA_KERNEL=$(KERNEL) $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec $(TESTFLAGS) -run '$(SIWCMEXRUN)' ./rdmacm/examples

# The fabric-aware tests again on soft-iWARP (docs/testing.md, "Fabrics"):
# whole packages; the CLI's ping, devinfo, selftest, bench -R, rstream,
# riostream and rcopy tests (rsocket against rdma-core's tools in
# rsockets' iWARP form); and the rpma examples that end by themselves (06 and 13 wait
# 15 s and 10 s for clients that do not come; 10 and 11 send immediate
# data, which iWARP has not); and the manual's srq example and the
# rdma_cm examples' error tests (mckey, mc and apm need UD, multicast and
# path migration).
SIWPKGS   := ./uverbs ./rdmacm ./rpma ./rsocket
SIWCMDPKGS := ./cmd/purerdma $(addprefix ./cmd/purerdma/internal/,bench devinfo ping rcopy rstream selftest)
SIWCMDRUN := ^(TestPing(Interop|Go|Persistent|Errors|Cancel|JSON)|TestDevinfoMatchesIbvDevinfo|TestSelftest(Passes|FailsOnWrongData|LostCompletion)|TestHWCheckScript|TestBenchCM|TestRstream(Interop.*|GoGo.*|VMInterrupt)|TestRiostream(Interop.*|GoGo)|TestRcopy(Interop|Refused))$$
SIWEXRUN  := ^TestExample(01|02|03|04|05|07|08|08srq|09|09scch|12|12scch)[A-Z]
SIWCMEXRUN := ^(TestSRQ|TestErrors)$$

# The concurrency tests again, built with the race detector, in the VM.
# The race runtime needs cgo in the test binary (only there: the library
# builds with CGO_ENABLED=0, which make lint checks). scripts/vmexec-race
# runs each binary as NAME.race.test, so the VM log tells these runs apart.
# The tests it runs carry the directive //purerdma:race in their doc
# comment; internal/cmd/racetests lists them and their packages.
# RACERUN replaces the pattern (RACERUN=. runs every test of those
# packages), RACEFLAGS adds go test flags (RACEFLAGS=-v).
RACERUN ?=
RACEFLAGS ?=
vmrace: deps
	@pkgs=$$($(GO) run ./internal/cmd/racetests -pkgs) && run=$$($(GO) run ./internal/cmd/racetests -run) || exit 1; \
	  if [ -n '$(RACERUN)' ]; then run='$(RACERUN)'; fi; \
	  echo "go test -race -run '$$run' $$pkgs"; \
	  CGO_ENABLED=1 PURERDMA_KERNEL=$(KERNEL) $(GO) test -race -count=1 -exec $(CURDIR)/scripts/vmexec-race -run "$$run" $(RACEFLAGS) $$pkgs

vmtest-all:
	@set -e; for k in $(KERNELS); do \
	  $(MAKE) --no-print-directory vmtest KERNEL=$$k; \
	  $(MAKE) --no-print-directory vmrace KERNEL=$$k; \
	done

# Every fuzz target (go test -list finds them) for FUZZTIME each, two at
# a time; scripts/fuzz has the knobs.
FUZZTIME ?= 10s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz

# The empty-root VM on each kernel: purerdma and an rpma example, static,
# with nothing from the host's file system (docs/containers.md).
emptyroot: deps
	@set -e; for k in $(KERNELS); do \
	  PURERDMA_KERNEL=$$k PURERDMA_TEST_EMPTYROOT=1 $(GO) test -count=1 -v -run '^TestEmptyRoot$$' ./testenv/vm; \
	done

test: deps lint unit fuzz emptyroot vmtest-all vmtest-bed

# perftest's C tools and purerdma bench side by side (scripts/bench), then
# C librpma and the rpma package (scripts/bench-rpma, in a boot of its
# own: each takes 15-35 minutes), then C rstream and purerdma rstream
# (scripts/bench-rsocket), per kernel, then the same tools across the
# two-VM bed, client on 6.1 and server on 6.12 (scripts/bench-peer);
# docs/performance.md has the method and results.
bench: deps tools
	@set -e; for k in $(KERNELS); do \
	  $(BIN)/rxevm -kernel $$k -timeout 20m -- $(CURDIR)/scripts/bench; \
	  $(BIN)/rxevm -kernel $$k -timeout 60m -- $(CURDIR)/scripts/bench-rpma; \
	  $(BIN)/rxevm -kernel $$k -timeout 30m -- $(CURDIR)/scripts/bench-rsocket; \
	done
	$(BIN)/rxevm -kernel 6.1 -peer 6.12 -timeout 30m -- $(CURDIR)/scripts/bench-peer

# The demo's C librpma peer (the one make bench uses), built on the host:
# compiling it in the emulated VM takes 20-45 s.
$(BIN)/rpmabench: cmd/purerdma/internal/bench/testdata/rpmabench.c
	@mkdir -p $(BIN)
	gcc -O2 -Wall -o $@ $< -lrpma -libverbs -lm

demo: deps tools $(BIN)/rpmabench
	$(BIN)/rxevm -kernel $(KERNEL) -- $(CURDIR)/scripts/demo

clean:
	rm -rf $(BIN)

# Soak tests (not part of make test): every uverbs object opened and closed
# 10 000 times, 1 000 rdma_cm, 1 000 rpma and 1 000 rsocket connections
# (and 1 GiB through one rsocket connection), each checked for
# leaked descriptors, goroutines, kernel objects (rdma res) and RSS growth;
# one VM boot per package and kernel (docs/reliability.md, "Soak").
.PHONY: soak
soak: deps
	@set -e; for k in $(KERNELS); do \
	  PURERDMA_SOAK=1 PURERDMA_KERNEL=$$k $(GO) test -count=1 -p 1 -timeout 30m -exec $(CURDIR)/scripts/vmexec \
	    -run '^TestSoak' -v $(TESTFLAGS) ./uverbs ./rdmacm ./rpma; \
	  PURERDMA_SOAK=1 PURERDMA_KERNEL=$$k $(GO) test -count=1 -timeout 60m -exec $(CURDIR)/scripts/vmexec \
	    -run '^(TestStream|TestManyConnections)$$' -v $(TESTFLAGS) ./rsocket; \
	done

# The two-VM bed (rxevm -peer, docs/testing.md "The two-VM bed"): its own
# tests and the cross-host suites (purerdma pingpong, ping, rstream and
# bench connect's 500-connection storm against themselves and rdma-core's
# tools, and rpma examples against C librpma's, one end on each VM; built
# only with the tag purerdma_peer), one VM per kernel, 6.1 beside 6.12 and 6.12
# beside 6.1 (make test runs the first pair: vmtest-bed below); then a
# peer VM that hangs and then crashes under rxevm-peer, in a bed of its
# own. The suites include the network-fault table (internal/faults).
.PHONY: vmtest-peer
PEERPAIRS ?= 6.1:6.12 6.12:6.1
PEERPKGS  := ./testenv/vm ./cmd/purerdma ./rpma/examples ./internal/faults
vmtest-peer: deps examples
	@set -e; for pair in $(PEERPAIRS); do \
	  echo "== $${pair%%:*} beside $${pair##*:}"; \
	  PURERDMA_EXAMPLES_BIN=$(EXAMPLES_BIN) PURERDMA_KERNEL=$${pair%%:*} PURERDMA_PEER_KERNEL=$${pair##*:} $(GO) test -count=1 -p 1 -tags purerdma_peer \
	    -exec $(CURDIR)/scripts/vmexec -run '^TestPeer' $(TESTFLAGS) $(PEERPKGS); \
	done
	PURERDMA_KERNEL=6.1 PURERDMA_PEER_KERNEL=6.12 $(GO) test -count=1 -exec $(CURDIR)/scripts/vmexec \
	  -run '^TestBedPeerFailures$$' $(TESTFLAGS) ./testenv/vm

# The part of vmtest-peer that make test runs: the cross-host suites and
# the fault table on one bed, 6.1 on the first VM beside 6.12 on the
# peer. Every suite runs its server on each VM in turn, so both
# directions between the two kernels are covered; the second pair (6.12
# beside 6.1) and the bed's hang and crash test are in make vmtest-peer.
.PHONY: vmtest-bed
vmtest-bed: deps examples
	PURERDMA_EXAMPLES_BIN=$(EXAMPLES_BIN) PURERDMA_KERNEL=6.1 PURERDMA_PEER_KERNEL=6.12 $(GO) test -count=1 -p 1 -tags purerdma_peer \
	  -exec $(CURDIR)/scripts/vmexec -run '^TestPeer' $(TESTFLAGS) $(PEERPKGS)
