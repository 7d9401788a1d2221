# Tollgate: a per-key rate limiter for Envoy, as a proxy-wasm module written in Go.
#
#   make build   the module (build/tollgate.wasm, size-optimized by binaryen's wasm-opt when
#                installed, its data packed into one segment; its function names in
#                build/tollgate.wasm.names) and the CLI (build/tollgate)
#   make run     the module in the embedded host, in front of a demo upstream
#   make test    the whole suite (it builds the module itself), with every skip named
#   make test-race  the packages that run natively, under the race detector (CI runs both)
#   make bench   benchmarks
#   make bench-report  the figures BENCHMARKS.md quotes, from one run (bench/results/report.*)
#   make bench-profile sampling profiles of each module alone (Linux, perf; bench/results/profile.*)
#   make fuzz    every fuzz target for FUZZTIME each (an execution count: 300000x)
#   make soak    the long runs: a million requests in the Envoy 1.33 profile (poll_oneoff), the
#                exactness property over many more seeds, CAS retry rates over more requests,
#                the key table's placement property over 20,000 interleavings, a million-key flood
#   make check   gofmt, go vet (native and wasip1), go mod tidy, staticcheck (pinned)
#   make ratelimit  envoyproxy/ratelimit for the global-limit tests (needs the Go module proxy)
#   make image   the Wasm OCI image Istio and Envoy Gateway pull, as an OCI layout in build/image
#                (no Docker needed); IMAGE=REGISTRY/REPOSITORY:TAG make push pushes it
#   make release the module, its checksum and the image of VERSION, in one step
#   make image-docker  the same image built by Docker or Podman, tagged IMAGE
#   make e2e-envoy  the end-to-end scenario against a real Envoy container (needs Docker)

GO       ?= go
WASM     := build/tollgate.wasm
BIN      := build/tollgate
LISTEN   ?= 127.0.0.1:8080
UPSTREAM ?= 127.0.0.1:8081
CONFIG   ?= examples/tollgate.json
# An execution count rather than a duration: Go 1.26's fuzzer can end a time-based run with a
# spurious "context deadline exceeded".
FUZZTIME ?= 300000x
# make bench BENCHCOUNT=6 repeats every benchmark for benchstat (BENCHMARKS.md uses 6).
BENCHCOUNT ?= 1
BENCH      ?= .
# The version the module logs at start-up and `tollgate version` prints: the tag on a tagged
# commit, else the tag and the commits since it, else the commit; "-dirty" with local changes.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/tollgate-proxy/tollgate/internal/version.Version=$(VERSION)
# Every fuzz target as package:Target; e2e's TestMakeFuzzRunsEveryTarget keeps the list complete.
FUZZ_TARGETS := ./config:FuzzParse ./limiter:FuzzTake ./limiter:FuzzWindows ./limiter:FuzzCalendarWindow \
	./internal/admission:FuzzDecodeSlot ./internal/admission:FuzzClientAddress \
	./internal/admission:FuzzNthFromRight ./internal/admission:FuzzQueryParam \
	./internal/admission:FuzzPartitionKey ./internal/admission:FuzzSplitAuthority ./internal/admission:FuzzPathReadings ./internal/wire:FuzzDecodePairs ./internal/wire:FuzzPairsValue \
	./config:FuzzDecodeMatchesEncodingJSON ./config:FuzzIsProtobufMessage ./internal/rls:FuzzDecodeResponse \
	./internal/simulate:FuzzParseEnvoyJSON ./internal/simulate:FuzzParseCombined \
	./internal/netaddr:FuzzParseAddr ./internal/netaddr:FuzzPrefix ./internal/duration:FuzzParse ./internal/duration:FuzzFormat \
	./internal/wasmbin:FuzzSections ./internal/wasmdata:FuzzPack ./internal/wasmnames:FuzzSplit ./internal/wasmnames:FuzzParseMap ./internal/wasmaddr:FuzzNarrow ./internal/wasmjump:FuzzThread ./internal/usage:FuzzScanner ./internal/usage:FuzzWholeNumber ./internal/heavy:FuzzDecode \
	./bench/profile:FuzzParseSamples ./bench/profile:FuzzParseScript
# envoyproxy/ratelimit for the global-limit tests (e2e/ratelimit, which pins the same version):
# built with go install into build/ratelimit/<version>/ by `make ratelimit`, or by the tests.
RATELIMIT_VERSION ?= v1.4.1-0.20260122083618-3fb702589d36
RATELIMIT_BIN := build/ratelimit/$(RATELIMIT_VERSION)
# staticcheck for make check, pinned; go run fetches it from the Go module proxy (it is no
# dependency of the module). It checks the native build; go vet also checks the wasip1 files.
STATICCHECK_VERSION ?= v0.8.2
# The module's optimizer: binaryen's wasm-opt (Debian: binaryen) at -Oz, keeping the name section
# (-g) so that the next step can map the functions' names; the features are what upstream Go
# emits. Before it, internal/wasmaddr/narrowaddr rewrites Go's 64-bit address arithmetic in 32
# bits, which --low-memory-unused lets wasm-opt fold into the loads' and stores' offsets (Go
# keeps the first 4096 bytes of memory as a zero page; BENCHMARKS.md, section 5), and the 64-bit
# loads and comparisons whose upper half is never used; then internal/wasmjump/threadjumps sends
# each jump forward straight to its target instead of through its function's dispatch loop
# (BENCHMARKS.md, section 1). Without wasm-opt the module is built all the same, unoptimized, and
# the build says so.
# The tests' builds (internal/testbuild) read WASM_OPT_FLAGS from this line.
WASM_OPT       ?= wasm-opt
WASM_OPT_FLAGS ?= -Oz -g --low-memory-unused --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext
# The compiler's flags for the module: the configuration's parser and validator, which run only
# when the plugin is configured, are compiled without inlining, a seventh of the module less
# (BENCHMARKS.md); nothing on the request path changes. The tests' builds read WASM_GCFLAGS too.
WASM_GCFLAGS ?= github.com/tollgate-proxy/tollgate/config=-l
# make wasm builds one module: PKG (the filter) with build TAGS into WASM, optimizes it, packs its
# data segments into one, compressed, which a start function unpacks at instantiation
# (internal/wasmdata/packdata; BENCHMARKS.md, section 5), then moves its function names to
# WASM.names (internal/wasmnames/splitnames): the module keeps its entry points' names, so that
# Envoy still prints a trap's backtrace, and `tollgate backtrace` names the other frames from the
# map (docs/troubleshooting.md).
PKG  ?= ./filter
TAGS ?=
# Packages linked into the module: they must also vet for wasip1.
WASM_PKGS := ./filter ./internal/plugin ./internal/abi ./internal/wire ./internal/admission ./internal/netaddr ./internal/rls ./internal/version ./internal/duration ./internal/usage ./config ./limiter ./internal/heavy ./internal/digest
# vet_wasip1 vets the wasip1 build of a package ($(2)) with build tags $(1), without its tests:
# they run natively only, where durations are package time's (internal/duration says why).
vet_wasip1 = echo "vet wasip1 $(1) $(2)" && files=$$(GOOS=wasip1 GOARCH=wasm $(GO) list -tags '$(1)' -f '{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}' $(2)) && \
	GOOS=wasip1 GOARCH=wasm $(GO) vet -tags '$(1)' $$files

.PHONY: build wasm run test test-race bench bench-report bench-profile fuzz soak check lint clean image push image-docker release e2e-envoy ratelimit

# build/tollgate.wasm.sha256 is in sha256sum's format ("HEX  tollgate.wasm"): `sha256sum -c` in
# build/ checks it, and its first field is what Envoy's vm_config.code.remote.sha256 wants.
build: wasm
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/tollgate
	cd $(dir $(WASM)) && { sha256sum $(notdir $(WASM)) 2>/dev/null || shasum -a 256 $(notdir $(WASM)); } > $(notdir $(WASM)).sha256
	@echo "built $(WASM) $(VERSION) ($$(wc -c < $(WASM)) bytes, sha256 $$(cut -d' ' -f1 $(WASM).sha256)) and $(BIN)"

wasm:
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -gcflags '$(WASM_GCFLAGS)' -ldflags '$(LDFLAGS)' -tags '$(TAGS)' -o $(WASM) $(PKG)
	@if command -v $(WASM_OPT) >/dev/null 2>&1; then \
		$(GO) run ./internal/wasmaddr/narrowaddr $(WASM) && \
		$(GO) run ./internal/wasmjump/threadjumps $(WASM) && \
		$(WASM_OPT) $(WASM_OPT_FLAGS) $(WASM) -o $(WASM).opt && mv $(WASM).opt $(WASM); \
	else \
		echo "$(WASM_OPT) not found (Debian: apt-get install binaryen): $(WASM) is not size-optimized"; \
	fi
	$(GO) run ./internal/wasmdata/packdata $(WASM)
	$(GO) run ./internal/wasmnames/splitnames $(WASM)

run: build
	@echo
	@echo "Tollgate is starting on http://$(LISTEN) with $(CONFIG): 3 requests per API key, then one more every 10 s."
	@echo "In another terminal:"
	@echo "  for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code} ' -H 'x-api-key: alice' http://$(LISTEN)/; done; echo   # 200 200 200 429"
	@echo "  curl -i -H 'x-api-key: alice' http://$(LISTEN)/    # 429 Too Many Requests, Retry-After: seconds until the next token"
	@echo "  curl -i -H 'x-api-key: bob' http://$(LISTEN)/      # 200: another key has its own bucket"
	@echo "  curl -i http://$(LISTEN)/                          # 401: no x-api-key"
	@echo "Stop with Ctrl-C."
	@echo
	@$(BIN) demo-upstream --listen $(UPSTREAM) & upstream=$$!; \
	trap 'kill $$upstream 2>/dev/null' EXIT INT TERM; \
	$(BIN) serve --config $(CONFIG) --listen $(LISTEN) --upstream http://$(UPSTREAM)

# The global-limit tests need redis-server on PATH and envoyproxy/ratelimit (see ratelimit);
# they skip, naming what is missing, unless CI=true, where they fail. The latency a global check
# adds, measured in the same run, ends up in build/global-latency.txt.
# internal/testsummary prints what go test prints without -v (failed tests' output, a line per
# package), then every skipped test with its reason, the latency report, and a closing count; it
# fails on any failure, including go test's own exit status.
test:
	@rm -f build/global-latency.txt
	@{ $(GO) test -count=1 -timeout 25m -json ./... || echo "go test: exit status $$?"; } | \
		$(GO) run ./internal/testsummary -report build/global-latency.txt

# The race detector over the packages that run natively: everything but the e2e and bench
# packages, which drive the module through the host and are slow under it (internal/host's own
# tests cover the host's concurrency), and cmd/tollgate-image, which starts no goroutine and whose
# tests spend their time compressing and hashing whole modules (four minutes under the detector).
# -short trims the limiter's single-threaded reference-model properties to a tenth of their
# seeds; make test runs them all. CI runs it after make test.
RACE_PKGS := ./limiter/... ./config/... ./filter/... ./internal/... ./cmd/tollgate/... ./deploy/...
test-race:
	@{ $(GO) test -count=1 -race -short -json $(RACE_PKGS) || echo "go test -race: exit status $$?"; } | $(GO) run ./internal/testsummary

# envoyproxy/ratelimit's service and config checker at RATELIMIT_VERSION, from the Go module proxy.
ratelimit:
	GOBIN=$(CURDIR)/$(RATELIMIT_BIN) GOOS= GOARCH= CGO_ENABLED=0 $(GO) install \
		github.com/envoyproxy/ratelimit/src/service_cmd@$(RATELIMIT_VERSION) \
		github.com/envoyproxy/ratelimit/src/config_check_cmd@$(RATELIMIT_VERSION)
	@echo "built $(RATELIMIT_BIN)/service_cmd and config_check_cmd"

# Every benchmark: the floor ratios, native decision, crossings and guest allocations, workers,
# memory and size, HTTP, start-up (bench/doc.go), and the limiter's own. No timing is asserted
# anywhere.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(BENCHCOUNT) -timeout 2h ./...

# The benchmarks BENCHMARKS.md quotes, REPORTCOUNT times each, in one run: the raw output goes to
# bench/results/report.txt, the tables to bench/results/report.md and into BENCHMARKS.md's
# generated sections (bench/report).
REPORTCOUNT ?= 5
bench-report:
	$(GO) run ./bench/report -count $(REPORTCOUNT)

# Where each module's time goes when it runs alone: BenchmarkAlone under perf record, each module
# and request type at two lengths, in PROFILEROUNDS rounds; the samples go to
# bench/results/profile.samples and the tables written from them to bench/results/profile.txt
# (bench/profile).
PROFILEROUNDS ?= 2
bench-profile:
	$(GO) run ./bench/profile -rounds $(PROFILEROUNDS)

fuzz:
	@set -e; for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target##*:}; \
		echo "== $$name ($$pkg), -fuzztime $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME); \
	done

# The long runs behind TOLLGATE_SOAK=1 (minutes): the poll_oneoff soak, the exactness property over
# 1500 seeds, the hot-key retry rates over 25,000 requests per worker, a million-key flood.
soak:
	TOLLGATE_SOAK=1 $(GO) test -count=1 -v -timeout 60m \
		-run '^(TestSoakPollOneoff|TestExactUnderConcurrency|TestHotKeyCASRetryRate|TestKeyFloodIsBoundedAndSparesWellBehavedKeys)$$' ./e2e
	TOLLGATE_SOAK=1 $(GO) test -count=1 -v -timeout 60m -run '^TestPlacementUnderAdversarialInterleavings$$' ./internal/admission

check lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@for pkg in $(WASM_PKGS); do $(call vet_wasip1,,$$pkg) || exit 1; done
	@$(call vet_wasip1,tollgate_stats,./filter)
	@$(call vet_wasip1,,./internal/memstats)
	@$(call vet_wasip1,tollgate_faults,./internal/plugin)
	$(GO) mod tidy -diff
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# The image holds build/tollgate.wasm as plugin.wasm in one layer (cmd/tollgate-image says which
# media types and why; docs/istio.md and docs/envoy-gateway.md how to use it). make image writes
# it as an OCI image layout and prints its digest; IMAGE=registry.example.com/tollgate:0.1.0
# make push pushes it with the credentials of `docker login`. Neither needs a container engine.
IMAGE_DIR := build/image
image: build
	$(GO) run ./cmd/tollgate-image build --wasm $(WASM) --version $(VERSION) --out $(IMAGE_DIR)

push:
	@[ -n "$(IMAGE)" ] || { echo "make push: say where to push: IMAGE=registry.example.com/tollgate:$(VERSION) make push" >&2; exit 2; }
	@$(MAKE) --no-print-directory image VERSION=$(VERSION)
	$(GO) run ./cmd/tollgate-image push --layout $(IMAGE_DIR) --image $(IMAGE)

# The same image built by Docker or Podman from deploy/image/Dockerfile, tagged IMAGE.
image-docker: build
	deploy/image/build.sh $(or $(IMAGE),tollgate:$(VERSION)) $(WASM)

# A release: the module, its checksum, its function name map and the image, all of VERSION, from a
# clean work tree.
release:
	@case "$(VERSION)" in *-dirty) echo "make release: the work tree has changes ($(VERSION)); commit them, or tag the commit, first" >&2; exit 1;; esac
	@$(MAKE) --no-print-directory image VERSION=$(VERSION)
	@echo
	@echo "release $(VERSION):"
	@echo "  module    $(WASM)"
	@echo "  checksum  $(WASM).sha256: $$(cut -d' ' -f1 $(WASM).sha256)"
	@echo "  names     $(WASM).names: keep it with the module; tollgate backtrace --names $(WASM).names names the frames of Envoy's trap backtraces"
	@echo "  image     $(IMAGE_DIR)/ (OCI layout): push it with IMAGE=REGISTRY/REPOSITORY:$(VERSION) make push"

# Builds the module, starts e2e/envoy/compose.yaml, runs the shared scenario against Envoy and
# always takes the containers down. Fails (rather than skips) when no Docker daemon answers.
e2e-envoy: build
	TOLLGATE_REQUIRE_DOCKER=1 $(GO) test -count=1 -v -run '^TestScenarioInEnvoy$$' ./e2e/envoy

clean:
	rm -rf build
