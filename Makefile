# linegate — developer entry points. `make local` runs the whole pipeline on
# this machine; `make test` is what CI runs (.ci/run).
GO        ?= go
# Every function is built the way SAM's `BuildMethod: makefile` builds it:
# the build-<LogicalId> targets below, with ARTIFACTS_DIR set. lambda.norpc
# drops the RPC runtime provided.al2023 never uses.
LAMBDA_TAGS   = lambda.norpc
LAMBDA_FLAGS  = -tags $(LAMBDA_TAGS) -trimpath -ldflags '-s -w'
LAMBDA_GOARCH ?= arm64
LAMBDA_BUILD  = CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_GOARCH) $(GO) build $(LAMBDA_FLAGS)
ARTIFACTS_DIR ?= .aws-sam/manual
FUZZTIME  ?= 20s
TIME_SCALE ?= 30
# Where `make local` keeps its queues, tables and event log across restarts
# (`make local STATE=` runs in memory only).
STATE     ?= .linegate

.PHONY: build test unit lint local deploy bench fuzz cfn-lint clean sam-test \
        build-WebhookFunction build-WorkerFunction build-NotifierFunction build-QuotaFunction

## build: every Lambda's linux/arm64 bootstrap under .aws-sam/manual/<LogicalId>/
## (the same recipe SAM runs), plus bin/linegate
build:
	@for f in WebhookFunction WorkerFunction NotifierFunction QuotaFunction; do \
	  $(MAKE) --no-print-directory build-$$f ARTIFACTS_DIR=$(abspath $(ARTIFACTS_DIR))/$$f || exit 1; \
	done
	$(GO) build -o bin/linegate ./cmd/linegate

# SAM's `BuildMethod: makefile` calls these with ARTIFACTS_DIR set.
build-WebhookFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhook
build-WorkerFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/worker
build-NotifierFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/notifier
build-QuotaFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/quota

## test: vet, every test with the race detector, and cfn-lint on template.yaml;
## ends with the list of skipped tests (internal/cmd/testsummary)
test: cfn-lint
	$(GO) vet ./...
	GO=$(GO) $(GO) run ./internal/cmd/testsummary -race -count=1 ./...

## sam-test: only the real AWS SAM CLI's run over events/ (sam validate --lint,
## sam build, sam local invoke of every sample against linegate local), which
## `make test` runs too; needs sam on PATH and Docker (docs/testing.md)
sam-test:
	@command -v sam >/dev/null 2>&1 || { echo "sam is not on PATH (docs/testing.md: the AWS SAM CLI and Docker)" >&2; exit 1; }
	$(GO) test -count=1 -v -run 'TestSAMCLIRunsEverySample' ./internal/samcli

## unit: the tests without the race detector (faster while editing)
unit:
	$(GO) test ./...

# cfn-lint missing: a loud skip on a developer machine, a failure in CI
# (CI=true), as the tests that need it do. README "Two commands" says how
# to install it.
cfn-lint:
	@if command -v cfn-lint >/dev/null 2>&1; then \
	  echo "cfn-lint template.yaml"; cfn-lint template.yaml; \
	elif [ "$$CI" = true ]; then \
	  echo "cfn-lint is required in CI but not on PATH" >&2; exit 1; \
	else \
	  echo "SKIPPED LOUDLY: cfn-lint not installed: template.yaml NOT linted (Debian: pipx install cfn-lint, see README)"; \
	fi

## lint: gofmt, go vet, staticcheck, cfn-lint
lint: cfn-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## local: the whole pipeline in one process (see README)
local:
	$(GO) run ./cmd/linegate local --time-scale $(TIME_SCALE) $(if $(STATE),--state $(STATE)) $(LOCAL_FLAGS)

## deploy: sam build + sam deploy (needs the SAM CLI and AWS credentials)
deploy:
	sam build && sam deploy

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

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf .aws-sam bin bench-out

.PHONY: screenshots
## screenshots: the console's browser tests remake docs/console*.png (needs chromium)
screenshots:
	CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run Browser ./internal/console
