# Kafka -> Azure Event Hubs mirror. `make demo` and `make test` are all a
# newcomer needs; the other targets are listed by `make help`.

GO       ?= go
APP      := build/app
ZIP      := dist/ehmirror-functionapp.zip
CONFIG   ?=
LISTEN   ?= 127.0.0.1:5672
# Local runs (make dev-env, make start). The names avoid the KAFKA_*,
# MIRROR_*, EVENTHUBS* prefixes: make exports command-line variables to the
# handler, which reports such names that are not settings.
DEV_KAFKA_PORT     ?= 9092
DEV_EVENTHUBS_PORT ?= 5672
DEV_DATA_DIR       ?=
SETTINGS           ?= local.settings.json
PORT               ?=
# Fuzz budgets count executions, not seconds: go1.26's fuzz coordinator can
# fail a -fuzztime=<duration> run at its deadline with a spurious "context
# deadline exceeded" (golang/go#75804, fixed in go1.27).
FUZZTIME ?= 100000x

.PHONY: help demo test unit vet fmt-check fuzz infra-test conformance build package start dev-env emulator bench soak deploy clean browser pysdk status-page-png

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

demo: ## mirror the seed's 10,000 messages through embedded Kafka, the emulator and the real handler, then verify
	$(GO) run ./scripts/demo

test: vet fmt-check unit fuzz infra-test conformance ## every test: vet, gofmt, unit/integration (race), short fuzz runs, Terraform, the SDK suite against the emulator
	@echo "make test: all checks passed"

vet: ## go vet
	$(GO) vet ./...

fmt-check: ## fail when gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

unit: browser pysdk ## go test -race ./...
	$(GO) test -race -count=1 -timeout 20m ./...

browser: ## headless chromium for the status page test; installed with apt-get when CI=true and missing
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then :; \
	elif [ "$$CI" = "true" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "the status page test needs a headless browser: apt-get install -y chromium"; fi

status-page-png: browser ## docs/status-page.png: the status page in headless chromium while Event Hubs refuses connections (the outage test's failure state)
	EHMIRROR_SCREENSHOT=$(CURDIR)/docs/status-page.png $(GO) test -count=1 -run 'TestOnCallEventHubsRefusedThenBack$$' ./handler

pysdk: ## Microsoft's Python Event Hubs SDK with its Blob checkpoint store (Debian's python3-azure) for the emulator's Python SDK tests and the cut-over's Python processor; installed with apt-get when CI=true and missing
	@if /usr/bin/python3 -c 'import azure.eventhub, azure.eventhub.extensions.checkpointstoreblob, websocket' >/dev/null 2>&1; then :; \
	elif [ "$$CI" = "true" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-azure python3-websocket; \
	else echo "the Python SDK tests (emulator, checkpointstore) need: apt-get install -y python3-azure python3-websocket"; fi

fuzz: ## short runs of every fuzz target (FUZZTIME executions each)
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) ./emulator/amqp
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeValue$$' -fuzztime $(FUZZTIME) ./emulator/amqp
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeMessage$$' -fuzztime $(FUZZTIME) ./emulator/amqp
	$(GO) test -run '^$$' -fuzz '^FuzzServeConnection$$' -fuzztime $(FUZZTIME) ./emulator
	$(GO) test -run '^$$' -fuzz '^FuzzDeliveredEvent$$' -fuzztime $(FUZZTIME) ./emulator
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeInvocation$$' -fuzztime $(FUZZTIME) ./functions
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzClientKey$$' -fuzztime $(FUZZTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzParseCatchUpBody$$' -fuzztime $(FUZZTIME) ./handler
	$(GO) test -run '^$$' -fuzz '^FuzzParseOffsetsBody$$' -fuzztime $(FUZZTIME) ./handler
	$(GO) test -run '^$$' -fuzz '^FuzzHeaderRoundTrip$$' -fuzztime $(FUZZTIME) ./mirror
	$(GO) test -run '^$$' -fuzz '^FuzzCommitMeta$$' -fuzztime $(FUZZTIME) ./mirror

infra-test: ## terraform fmt, validate and test against the real azurerm provider (builds it once, ~20 min)
	bash scripts/terraform-check.sh

build: ## lay out the function app in build/app (host.json, function folders, handler binary)
	rm -rf $(APP) && mkdir -p $(APP)
	cp host.json $(APP)/
	for f in functions/*/function.json; do d=$$(basename $$(dirname $$f)); mkdir -p $(APP)/$$d; cp $$f $(APP)/$$d/; done
	CGO_ENABLED=0 $(GO) build -trimpath -o $(APP)/handler ./handler

package: ## the deployment zip for a Linux Premium plan (linux/amd64, static, executable bit set)
	rm -rf build/linux && mkdir -p build/linux dist
	cp host.json build/linux/
	for f in functions/*/function.json; do d=$$(basename $$(dirname $$f)); mkdir -p build/linux/$$d; cp $$f build/linux/$$d/; done
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '-s -w' -o build/linux/handler ./handler
	$(GO) run ./scripts/package -dir build/linux -out $(ZIP)

start: build ## run the app with `func start` (Core Tools), or the project's local host when func is missing; PORT=7071 (default: Host.LocalHttpPort of SETTINGS), SETTINGS=local.settings.json
	@if command -v func >/dev/null 2>&1; then \
		if [ -f $(SETTINGS) ]; then cp $(SETTINGS) $(APP)/local.settings.json; fi; cd $(APP) && func start --script-root . $(if $(PORT),--port $(PORT)) ; \
	else \
		echo "Azure Functions Core Tools (func) not found: running the project's local Functions host instead"; \
		$(GO) run ./scripts/funchost -app $(APP) -settings $(SETTINGS) $(if $(PORT),-port $(PORT)); \
	fi

dev-env: ## embedded Kafka and the Event Hubs emulator in the foreground; DEV_KAFKA_PORT=9092 DEV_EVENTHUBS_PORT=5672, DEV_DATA_DIR=dir keeps their data, writes their addresses into SETTINGS
	$(GO) run ./scripts/devenv -kafka 127.0.0.1:$(DEV_KAFKA_PORT) -eventhubs 127.0.0.1:$(DEV_EVENTHUBS_PORT) -settings $(SETTINGS) $(if $(DEV_DATA_DIR),-data-dir $(DEV_DATA_DIR))

emulator: ## the Event Hubs emulator alone: make emulator CONFIG=path/to/Config.json LISTEN=127.0.0.1:5672
	$(GO) run ./scripts/emulator $(if $(CONFIG),-config $(CONFIG)) -listen $(LISTEN)

conformance: ## the azeventhubs v2.0.2 SDK's own test suite against the emulator (Node.js+npm for Azurite; loopback ports 5671, 443)
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { echo "make conformance: Node.js 20+ and npm are required (Azurite, the checkpoint store)"; exit 1; }
	$(GO) run ./scripts/conformance

bench: ## throughput against the Kafka-read, Event-Hubs-send and parallel limits, latency, far Kafka, TLS, quota, scale-out, 1x1000 and 200-topics (writes .bench/latest.json); the emulator's own ingest
	$(GO) run ./scripts/bench
	@echo "emulator ingest, full 1 MiB batches of 1 KiB events (SDK over AMQP, SDK over amqps, raw AMQP client):"
	$(GO) test -run '^$$' -bench '^(BenchmarkIngest1KiB|BenchmarkIngest1KiBTLS|BenchmarkServerIngestRaw)$$' -benchtime 3s ./emulator

soak: ## the long fault-injection soak and a long run of the model-based test (minutes)
	EHMIRROR_MODEL_CHECKS=40 EHMIRROR_MODEL_STEPS=40 $(GO) test -race -count=1 -timeout 60m -run '^TestModelPositions$$' ./mirror/
	EHMIRROR_SOAK=1 $(GO) test -race -count=1 -timeout 60m -run 'Soak' -v ./faults/

deploy: package ## terraform apply, then upload the package to its blob and restart the apps (needs az login; DEPLOY_ARGS=--yes or CI=true: no prompt)
	bash scripts/deploy.sh $(DEPLOY_ARGS)

clean: ## remove build outputs
	rm -rf build dist .bench
