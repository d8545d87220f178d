# ringside — see README.md. `make experiments` and `make test` are the two
# commands a new user needs; everything else is for developers.
GO      ?= go
RESULTS ?= results

.PHONY: build test experiments lint bench ringnode-image compose-ring clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

test:
	$(GO) vet ./...
	$(GO) test -race ./...

# Every experiment of the catalogue on its default backend and quick profile.
experiments:
	$(GO) run ./cmd/ringside run all --out $(RESULTS)
	$(GO) run ./cmd/ringside report $(RESULTS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The ringnode image FROM scratch (no registry here) and a 5-server ring.
ringnode-image:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/image/ringnode ./cmd/ringnode
	cp compose/Dockerfile.ringnode bin/image/Dockerfile
	docker build -t $${RINGNODE_IMAGE:-ringside/ringnode:dev} bin/image

compose-ring: ringnode-image
	docker-compose -f compose/ring.yml up -d --scale node=4

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin $(RESULTS)
