# nvstripe developer entry points. `make test` is what CI runs (.ci/run).
GO       ?= go
BENCH    ?= .
BENCHPKG ?= ./...
# The layering test's checks (layering_test.go at the module root).
LAYERING := TestImportTable|TestPurePackages|TestBannedConstructs|TestPackageDocs|TestChecks

.PHONY: test fmt-check vet layering unit demo bench build

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

## layering: the import table (docs/architecture.md) and banned constructs, enforced.
layering:
	$(GO) test -count=1 -run '$(LAYERING)' .

unit:
	$(GO) test -race -timeout 40m ./...

## demo: the one-process demo (embedded etcd, NVMe/TCP targets, NBD).
demo:
	$(GO) run ./cmd/nvstripe demo

build:
	$(GO) build -o nvstripe ./cmd/nvstripe

## bench: every benchmark (or BENCH=regexp BENCHPKG=./pkg/...), saved under bench/out/.
bench:
	@mkdir -p bench/out
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCHPKG) | tee bench/out/bench-$$(date +%Y%m%d-%H%M%S).txt
