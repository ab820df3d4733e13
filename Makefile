# linegate — developer entry points. `make local` runs the whole pipeline on
# this machine; `make test` is what CI runs (.ci/run).
GO        ?= go
# Build tags per function. The webhook uses pkg/telemetry's lightweight X-Ray
# tracer (xraylite): the SDK's core package pulls in grpc and fasthttp, 10 MB
# of binary and milliseconds of cold start on the path LINE waits on.
# pkg/coldstart's test checks that its builds use these same tags.
TAGS_webhook  = lambda.norpc,xraylite
TAGS_worker   = lambda.norpc
TAGS_notifier = lambda.norpc
LAMBDA_FLAGS  = -trimpath -ldflags '-s -w'
FUNCTIONS  = webhook worker notifier
ARTIFACTS_DIR ?= .aws-sam/manual
FUZZTIME  ?= 20s
TIME_SCALE ?= 30

.PHONY: build test unit lint local deploy bench fuzz cfn-lint clean \
        build-WebhookFunction build-WorkerFunction build-NotifierFunction

## build: every Lambda as linux/arm64 bootstrap zips under .aws-sam/manual, plus bin/linegate
build:
	@for f in $(FUNCTIONS); do \
	  mkdir -p $(ARTIFACTS_DIR)/$$f && \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags $(TAGS_$$f) $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/$$f/bootstrap ./functions/$$f || exit 1; \
	done
	$(GO) build -o bin/linegate ./cmd/linegate

# SAM's `BuildMethod: makefile` calls these with ARTIFACTS_DIR set.
build-WebhookFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags $(TAGS_webhook) $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhook
build-WorkerFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags $(TAGS_worker) $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/worker
build-NotifierFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags $(TAGS_notifier) $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/notifier

## test: vet, every test with the race detector (and the webhook's xraylite
## build of pkg/telemetry), and cfn-lint on template.yaml
test: cfn-lint
	$(GO) vet ./...
	$(GO) vet -tags xraylite ./pkg/telemetry/... ./functions/webhook
	$(GO) test -race -count=1 ./...
	$(GO) test -race -count=1 -tags xraylite ./pkg/telemetry/...

## unit: the tests without the race detector (faster while editing)
unit:
	$(GO) test ./...

cfn-lint:
	cfn-lint template.yaml

## lint: gofmt, go vet, staticcheck, cfn-lint
lint: cfn-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## local: the whole pipeline in one process (see README)
local:
	$(GO) run ./cmd/linegate local --time-scale $(TIME_SCALE) $(LOCAL_FLAGS)

## deploy: sam build + sam deploy (needs the SAM CLI and AWS credentials)
deploy:
	sam build && sam deploy

## bench: Go benchmarks of the hot paths (benchstat-friendly), then the
## end-to-end comparison with the two baselines, the crash run and the chaos run
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./pkg/ingress ./pkg/bench ./pkg/cloud/pattern | tee bench.txt
	$(GO) run ./cmd/linegate bench
	$(GO) run ./cmd/linegate bench --crash
	$(GO) run ./cmd/linegate bench --chaos --events 10000

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf .aws-sam bin
