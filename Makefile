# The test command the README gives and CI runs.
GO ?= go

.PHONY: build test bench demo

build:
	$(GO) build -o bin/pgowl ./cmd/pgowl

test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./classify/ ./route/ ./proxy/ ./wire/

demo:
	$(GO) run ./cmd/pgowl demo
