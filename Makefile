# The test command the README gives and CI runs.
GO ?= go

.PHONY: build test bench demo

build:
	$(GO) build -o bin/pgowl ./cmd/pgowl

test:
	$(GO) vet ./...
	# One package at a time: the integration packages start real clusters and
	# measure failover and lag times, which a second package's clusters would skew.
	$(GO) test -p 1 -count=1 -timeout 60m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./classify/ ./route/ ./proxy/ ./wire/

demo:
	$(GO) run ./cmd/pgowl demo
