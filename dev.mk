# linegate's own targets, beyond the Makefile every linegate project has
# (which `linegate new` writes: internal/scaffold keeps a copy of it, and
# `make scaffold` refreshes the copies after an edit).
# make test here also lists the skipped tests (internal/cmd/testsummary).
TEST   = GO=$(GO) $(GO) run ./internal/cmd/testsummary -race -count=1 ./...
CLEAN += bench-out

.PHONY: sam-test bench scaffold screenshots

## scaffold: refresh what `linegate new` writes from this repository's
## template.yaml, Makefile, samconfig.toml, function mains and events/
scaffold:
	$(GO) generate ./internal/scaffold

## sam-test: only the real AWS SAM CLI's run over events/ (sam validate --lint,
## sam build, sam local invoke of every sample against linegate local), which
## `make test` runs too; needs sam on PATH and Docker (docs/testing.md)
sam-test:
	@command -v sam >/dev/null 2>&1 || { echo "sam is not on PATH (docs/testing.md: the AWS SAM CLI and Docker)" >&2; exit 1; }
	$(GO) test -count=1 -v -run 'TestSAMCLIRunsEverySample' ./internal/samcli

## bench: what docs/benchmarks.md cites, in one go: the accept path against
## the fair SDK baseline and the floor, the worker's overhead per record,
## both against another checkout too when BEFORE names one (a checkout with
## internal/ingress and internal/bench; copy internal/cputime and the two
## benchmark files into it for its cpu-ns/op), the cold starts with the
## secret fetched from SSM (moto_server) next to a hello-world function, and
## `linegate bench` at 100 ms, 1 s and 3 s of work, crashed, under chaos,
## flat out and with long work (--mix). Ratios come from one run
## (benchstat), each round of BENCH_COUNT running every benchmark once, in
## BEFORE first, so a slow moment of a shared machine falls on all of them.
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCH_COUNT ?= 6
BENCH_OUT   ?= bench-out
BEFORE      ?=
ACCEPT_BENCH = Accept|SDKValidateAndSplit|Floor|SDKParseRequest|ParseBody
bench:
	@mkdir -p $(BENCH_OUT)
	@rm -f $(BENCH_OUT)/accept-before.txt $(BENCH_OUT)/accept.txt $(BENCH_OUT)/worker-before.txt $(BENCH_OUT)/worker.txt
	@for i in $$(seq $(BENCH_COUNT)); do \
	  if [ -n "$(BEFORE)" ]; then \
	    (cd $(BEFORE) && $(GO) test -run '^$$' -bench '$(ACCEPT_BENCH)' -benchmem -count 1 ./internal/ingress) >> $(BENCH_OUT)/accept-before.txt || exit 1; \
	    (cd $(BEFORE) && $(GO) test -run '^$$' -bench WorkerRecord -benchmem -count 1 ./internal/bench) >> $(BENCH_OUT)/worker-before.txt || exit 1; \
	  fi; \
	  $(GO) test -run '^$$' -bench '$(ACCEPT_BENCH)' -benchmem -count 1 ./internal/ingress >> $(BENCH_OUT)/accept.txt || exit 1; \
	  $(GO) test -run '^$$' -bench WorkerRecord -benchmem -count 1 ./internal/bench >> $(BENCH_OUT)/worker.txt || exit 1; \
	done
	$(BENCHSTAT) -row /events -col .name $(BENCH_OUT)/accept.txt
	$(BENCHSTAT) $(BENCH_OUT)/worker.txt
	@if [ -n "$(BEFORE)" ]; then \
	  $(BENCHSTAT) before=$(BENCH_OUT)/accept-before.txt after=$(BENCH_OUT)/accept.txt && \
	  $(BENCHSTAT) before=$(BENCH_OUT)/worker-before.txt after=$(BENCH_OUT)/worker.txt; fi
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./internal/cloud/pattern | tee $(BENCH_OUT)/other.txt
	COLDSTART_STARTS=11 $(GO) test -count=1 -v -run 'TestColdStart$$' ./internal/coldstart
	$(GO) run ./cmd/linegate bench --work 100ms
	$(GO) run ./cmd/linegate bench --work 1s
	$(GO) run ./cmd/linegate bench --work 3s
	$(GO) run ./cmd/linegate bench --crash
	$(GO) run ./cmd/linegate bench --chaos --events 10000
	$(GO) run ./cmd/linegate bench --work 0 --events 5000 --concurrency 50 --bus-latency 0 --only durable-direct,linegate
	$(GO) run ./cmd/linegate bench --mix


.PHONY: screenshots
## screenshots: the console's browser tests remake docs/console*.png (needs chromium)
screenshots:
	CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run Browser ./internal/console
