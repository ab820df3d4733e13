# A linegate project's entry points: `make local` runs the whole pipeline on
# this machine, `make test` is what CI runs. `linegate new` writes this file,
# the same in every project (linegate's own repository too, which adds its
# targets in dev.mk); your own targets go in local.mk.
GO        ?= go
# The linegate CLI at the version go.mod requires (its tool directive).
LINEGATE  ?= $(GO) tool linegate
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
# What `make test` runs after go vet.
TEST      ?= $(GO) test -race -count=1 ./...
CLEAN     ?= .aws-sam bin

.PHONY: build test unit lint local deploy fuzz cfn-lint clean \
        build-WebhookFunction build-WorkerFunction build-NotifierFunction build-QuotaFunction

## build: every Lambda's linux/arm64 bootstrap under .aws-sam/manual/<LogicalId>/
## (the same recipe SAM runs), plus bin/linegate
build:
	@for f in WebhookFunction WorkerFunction NotifierFunction QuotaFunction; do \
	  $(MAKE) --no-print-directory build-$$f ARTIFACTS_DIR=$(abspath $(ARTIFACTS_DIR))/$$f || exit 1; \
	done
	$(GO) build -o bin/linegate github.com/linegate/linegate/cmd/linegate

# SAM's `BuildMethod: makefile` calls these with ARTIFACTS_DIR set.
build-WebhookFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhook
build-WorkerFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/worker
build-NotifierFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/notifier
build-QuotaFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/quota

## test: cfn-lint on template.yaml, go vet, every test with the race detector
test: cfn-lint
	$(GO) vet ./...
	$(TEST)

## unit: the tests without the race detector (faster while editing)
unit:
	$(GO) test ./...

# cfn-lint missing: a loud skip on a developer machine, a failure in CI
# (CI=true), as the tests that need it do.
cfn-lint:
	@if command -v cfn-lint >/dev/null 2>&1; then \
	  echo "cfn-lint template.yaml"; cfn-lint template.yaml; \
	elif [ "$$CI" = true ]; then \
	  echo "cfn-lint is required in CI but not on PATH" >&2; exit 1; \
	else \
	  echo "SKIPPED LOUDLY: cfn-lint not installed: template.yaml NOT linted (pipx install cfn-lint)"; \
	fi

## lint: gofmt, go vet, staticcheck, cfn-lint
lint: cfn-lint
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.*' -not -path '*/testdata/*')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## local: the whole pipeline on this machine, running this module's bot
local:
	$(LINEGATE) local --time-scale $(TIME_SCALE) $(if $(STATE),--state $(STATE)) $(LOCAL_FLAGS)

## deploy: sam build + sam deploy (needs the SAM CLI and AWS credentials)
deploy:
	sam build && sam deploy

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf $(CLEAN)

-include dev.mk local.mk
