# nvstripe developer entry points. `make test` is what CI runs (.ci/run).
GO       ?= go
BENCH    ?= .
BENCHPKG ?= ./...
# The layering test's checks (layering_test.go and docs_*_test.go at the module
# root): the import table and its copy in docs/architecture.md, banned
# constructs, paths and tracker references in comments and docs, the Go names
# the docs cite, the etcd schema's documented key prefixes.
LAYERING := TestImportTable|TestImportTableMatchesDocs|TestPurePackages|TestBannedConstructs|TestPackageDocs|TestChecks|TestCommentPaths|TestTrackerReferences|TestEtcdSchemaDocs|TestDocNames

.PHONY: test fmt-check vet layering unit demo bench build proto proto-tools campaign soak soak-props fuzz

# The gRPC APIs' schemas and the versions of the code generators that compile
# them. proto-tools installs the pinned plugins (.ci/run does too); protoc is
# Debian's protobuf-compiler (timestamp.proto from libprotobuf-dev).
PROTOS                     := agent/api/agent.proto controller/admin/admin.proto
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
# PROTO_OUT is where `make proto` writes (TestProtoGenerated points it at a
# temporary folder and compares with the committed files); PROTO_INCLUDE
# holds google/protobuf/timestamp.proto.
PROTO_OUT     ?= .
PROTO_INCLUDE ?= /usr/include
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin

## test: gofmt check, go vet, the layering test, then every test with -race.
test: fmt-check vet layering unit

## fmt-check: fail listing the files gofmt would change (testdata excluded).
fmt-check:
	@bad="$$(gofmt -l . | grep -v '/testdata/' || true)"; \
	if [ -n "$$bad" ]; then \
		echo "gofmt: these files are not formatted (run: gofmt -w FILE):"; echo "$$bad"; exit 1; \
	fi

vet:
	$(GO) vet ./...

## layering: the import table (and its copy in docs/architecture.md), banned constructs,
## paths, Go names and tracker references in comments and docs, the documented etcd schema.
layering:
	$(GO) test -count=1 -run '$(LAYERING)' .

unit:
	$(GO) test -race -timeout 40m ./...
	$(GO) test -race -count=1 ./meta/ -args -meta.mem # meta's tests again, on the in-memory etcd

## campaign: the fault campaign over real processes (test/campaign/doc.go), 50 rounds;
## `make test` runs 3 and 1 compound. `make campaign SEED=S ROUNDS=1` replays a
## failed round (COMPOUND=1 for a compound one, as the round's log line says).
## COMPOUND=1 overlaps two or three faults in every round; each round's reads
## and writes are checked for linearizability (porcupine). The 200 compound
## rounds of a release: `make campaign COMPOUND=1 ROUNDS=200` (2 to 3 hours
## on 2 cores; CAMPAIGN_DIR=DIR keeps the logs and any failing history's HTML,
## or its JSON when the check ran out of CAMPAIGN_CHECK_TIMEOUT, default 2m).
ROUNDS          ?= 50
SEED            ?= 0
COMPOUND        ?= 0
CAMPAIGN_ROUNDS ?= $(ROUNDS)
CAMPAIGN_SEED   ?= $(SEED)
CAMPAIGN_COMPOUND ?= $(COMPOUND)
# CAMPAIGN_FLAGS: more -campaign.* flags (test/campaign/campaign_test.go).
CAMPAIGN_FLAGS  ?=
campaign:
	$(GO) test -count=1 -v -timeout 0 -run TestCampaign ./test/campaign \
		-campaign.rounds=$(CAMPAIGN_ROUNDS) -campaign.seed=$(CAMPAIGN_SEED) \
		-campaign.compound=$(if $(filter 1 true yes,$(CAMPAIGN_COMPOUND)),true,false) -campaign.compound-rounds=0 $(CAMPAIGN_FLAGS)

## soak: the release check, hours long (scripts/soak.sh): soak-props, then
## every fuzz target for FUZZTIME, then SOAK_ROUNDS campaign rounds (compound
## with SOAK_COMPOUND=1, with CAMPAIGN_FLAGS); it ends with a table (stage,
## duration, cases/execs/rounds, result). SOAK_STAGES picks stages ("props fuzz campaign").
SOAK_STAGES   ?= props fuzz campaign
SOAK_ROUNDS   ?= 200
SOAK_COMPOUND ?= 1
soak:
	GO='$(GO)' SOAK_STAGES='$(SOAK_STAGES)' SOAK_CHECKS='$(SOAK_CHECKS)' SOAK_COUNT='$(SOAK_COUNT)' \
		FUZZTIME='$(FUZZTIME)' SOAK_ROUNDS='$(SOAK_ROUNDS)' SOAK_COMPOUND='$(SOAK_COMPOUND)' \
		CAMPAIGN_FLAGS='$(CAMPAIGN_FLAGS)' scripts/soak.sh

## soak-props: the volume property tests (the write hole and its siblings, the
## model, crashes, bit flips) over every layout at SOAK_CHECKS cases each,
## SOAK_COUNT times over; `make test` runs 100 (300 where cheap). SOAK_RUN
## narrows the tests. A failure prints its -rapid.seed and leaves a fail file
## under volume/testdata/rapid.
SOAK_CHECKS ?= 10000
SOAK_COUNT  ?= 1
SOAK_RUN    ?= TestPropertyWriteHole|TestPropertyAgainstModel|TestPropertyCrash|TestPropertyBitFlips|TestDroppedWritesProperty
soak-props:
	$(GO) test -count=$(SOAK_COUNT) -timeout 0 -run '$(SOAK_RUN)' ./volume \
		-volume.soak=$(SOAK_CHECKS) -rapid.checks=1000

## fuzz: every fuzz target (found by scripts/fuzz.sh) for FUZZTIME each, one
## at a time, then a table (target, time, execs, new interesting, crashers).
## New inputs stay in Go's fuzz cache; crashers land in the package's
## testdata/fuzz as seeds. FUZZ_RUN=regexp narrows, FUZZ_PARALLEL sets workers,
## FUZZ_JOBS=N fuzzes N targets side by side (each for the whole FUZZTIME; on 2
## cores FUZZ_JOBS=2 runs the 21 targets at 10m in under two hours, one worker each).
FUZZTIME ?= 10m
FUZZ_JOBS ?= 1
fuzz:
	GO='$(GO)' FUZZTIME='$(FUZZTIME)' FUZZ_JOBS='$(FUZZ_JOBS)' scripts/fuzz.sh

## gossip-sim: the memberlist simulation (health/gossipsim_test.go): pools of
## GOSSIP_SIZES members at the shipped gossip settings, one member killed in
## each; prints a table of detection times and gossip traffic per member
## (docs/scale.md, "Failure detection"). About 10 minutes on 2 cores; 1000
## members need more than 8 GiB of memory and half an hour.
GOSSIP_SIZES ?= 100,250,500
.PHONY: gossip-sim
gossip-sim:
	$(GO) test -count=1 -timeout 0 -run TestGossipSimTable -v ./health -gossipsim.sizes=$(GOSSIP_SIZES)

## scale: the scale harness (test/scale/doc.go, docs/scale.md "etcd at 10,000 nodes"):
## one etcd in a child process, SCALE_SIZES runs of AGENTS/HOSTS simulated
## nodes mapping through volclient over hosts x 16 namespaces, measured for
## SCALE_STEADY; prints one table. On an idle 2-core machine the four sizes take
## about 7 minutes (10,000 nodes 2.5); other work on the machine slows it many
## times and starves lease renewals (the table's harness scheduler column).
SCALE_SIZES  ?= 1000/250,2500/500,5000/1000,10000/1000
SCALE_STEADY ?= 1m
.PHONY: scale
scale:
	$(GO) test -count=1 -timeout 0 -run 'TestScale$$' -v ./test/scale -scale.run -scale.sizes=$(SCALE_SIZES) -scale.steady=$(SCALE_STEADY)

## proto: regenerate the committed *.pb.go files from the .proto files.
proto:
	PATH="$(GOBIN_DIR):$$PATH" protoc -I . -I $(PROTO_INCLUDE) \
		--go_out=$(PROTO_OUT) --go_opt=paths=source_relative \
		--go-grpc_out=$(PROTO_OUT) --go-grpc_opt=paths=source_relative \
		$(PROTOS)

proto-tools:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

## demo: the one-process demo (embedded etcd, NVMe/TCP targets, NBD).
demo:
	$(GO) run ./cmd/nvstripe demo

build:
	$(GO) build -o nvstripe ./cmd/nvstripe

## bench-stack: the full stack as users run it (etcd, six targets, a mapped 4+2 volume) under fio,
## beside nbdkit memory, in one table (docs/performance.md; ~5 min). SIZE, RUNTIME, ROUNDS,
## PROFILE=1, OUTPUT=json; NOISY=1 [NEIGHBOUR_FLAGS=...] for the noisy-neighbour table.
bench-stack:
	GO='$(GO)' scripts/bench-stack.sh

## bench: every benchmark (or BENCH=regexp BENCHPKG=./pkg/...), saved under test/bench/out/.
bench:
	@mkdir -p test/bench/out
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCHPKG) | tee test/bench/out/bench-$$(date +%Y%m%d-%H%M%S).txt
