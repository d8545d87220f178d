# ringside — see README.md. `make experiments` and `make test` are the two
# commands a new user needs; everything else is for developers.
GO      ?= go
RESULTS ?= results
KUBE_VERSION ?= v1.32.13
COMPOSE_VERSION ?= v2.40.3

.PHONY: build test experiments lint bench kube-tools compose-v2 ringnode-image compose-ring lb-images compose-lb compose-lb-down elector-image kind-up kind-deploy kind-experiment kind-down clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

# The kube tests run a real kube-apiserver and etcd, built by kube-tools;
# the compose tests run docker-compose 1.29 and compose v2 (compose-v2).
test: kube-tools compose-v2
	$(GO) vet ./...
	$(GO) test -race ./...

# Every experiment of the catalogue on its default backend and quick profile.
experiments: kube-tools
	$(GO) run ./cmd/ringside run all --out $(RESULTS)
	$(GO) run ./cmd/ringside report $(RESULTS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# kube-apiserver (≈3.5 min) and etcd 3.5 from the Go module proxy, built
# once into bin/ and reused (see tools/README.md).
kube-tools: bin/kube-apiserver bin/etcd

bin/kube-apiserver:
	cd tools/kube-apiserver && CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)" \
		-o ../../bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

bin/etcd:
	cd tools/etcd && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o ../../bin/etcd go.etcd.io/etcd/server/v3

# Compose v2 from the Go module proxy (tools/compose), built once into bin/
# by version and installed as the docker CLI plugin beside Debian's
# docker-compose 1.29, so both are tested.
compose-v2: bin/docker-compose-$(COMPOSE_VERSION)
	mkdir -p $(HOME)/.docker/cli-plugins
	install -m 0755 $< $(HOME)/.docker/cli-plugins/docker-compose

bin/docker-compose-$(COMPOSE_VERSION):
	cd tools/compose && CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$(COMPOSE_VERSION)" \
		-o ../../$@ github.com/docker/compose/v2/cmd

# The ringnode image FROM scratch (no registry here) and a 5-server ring.
ringnode-image:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/image/ringnode ./cmd/ringnode
	cp compose/Dockerfile.ringnode bin/image/Dockerfile
	docker build -t $${RINGNODE_IMAGE:-ringside/ringnode:dev} bin/image

# The ring's cluster secret, generated once into compose/.env (read by
# docker-compose from the compose file's folder).
compose/.env:
	echo "RINGNODE_SECRET=$$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" > $@

compose-ring: ringnode-image compose/.env
	docker-compose -f compose/ring.yml up -d --scale node=4

# Seed 004's stack: agent, balancer and worker images FROM scratch, and a
# Redis image from Debian's redis-server (no registry here; elsewhere leave
# REDIS_IMAGE unset and redis:7-alpine is pulled).
REDIS_IMAGE ?= ringside/redis:local
lb-images:
	for b in agent balancer worker; do \
		CGO_ENABLED=0 $(GO) build -trimpath -o bin/image-$$b/$$b ./cmd/$$b && \
		cp compose/Dockerfile.$$b bin/image-$$b/Dockerfile && \
		docker build -q -t ringside/$$b:dev bin/image-$$b || exit 1; \
	done
	compose/redis-image.sh $(REDIS_IMAGE)

compose-lb: lb-images
	REDIS_IMAGE=$(REDIS_IMAGE) docker-compose -f compose/lb.yml up -d

# Workers the agent started are not the project's: remove them by label.
compose-lb-down:
	docker-compose -f compose/lb.yml down
	docker ps -aq --filter label=ringside.pool=$${LB_POOL:-ringside-lb} | xargs -r docker rm -f
	docker network rm $${LB_NETWORK:-ringside-lb} 2>/dev/null || true

# The BLD paper's cluster on kind (k8s/kind.yaml: one control plane, three
# workers), the elector sidecar FROM scratch loaded into it, and one
# application of five replicas electing with ALGORITHM (k8s/overlays/).
# kind-experiment runs the kube experiments against that cluster.
ALGORITHM ?= bld
KIND_CLUSTER ?= ringside
KIND_KUBECONFIG ?= .kube/kind.kubeconfig
elector-image:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/image-elector/elector ./cmd/elector
	cp k8s/Dockerfile.elector bin/image-elector/Dockerfile
	docker build -q -t ringside/elector:dev bin/image-elector

kind-up:
	kind create cluster --name $(KIND_CLUSTER) --config k8s/kind.yaml
	mkdir -p $(dir $(KIND_KUBECONFIG))
	kind get kubeconfig --name $(KIND_CLUSTER) > $(KIND_KUBECONFIG)

kind-deploy: elector-image
	kind load docker-image ringside/elector:dev --name $(KIND_CLUSTER)
	kubectl --kubeconfig $(KIND_KUBECONFIG) apply -k k8s/overlays/$(ALGORITHM)

kind-experiment:
	for e in kube-distribution kube-election-latency kube-reelection; do \
		$(GO) run ./cmd/ringside run $$e --kubeconfig $(KIND_KUBECONFIG) --out $(RESULTS) || exit 1; \
	done
	$(GO) run ./cmd/ringside report $(RESULTS)

kind-down:
	kind delete cluster --name $(KIND_CLUSTER)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin/image bin/image-* $(RESULTS)
