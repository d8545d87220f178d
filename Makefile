# ringside — see README.md. `make experiments` and `make test` are the two
# commands a new user needs; everything else is for developers.
GO      ?= go
RESULTS ?= results
KUBE_VERSION ?= v1.32.13
COMPOSE_VERSION ?= v2.40.3

# The Go compiler, like any Go program, collects garbage at GOGC=100 — a
# sixth of a build's CPU here, for memory it gives back when it exits.
# Every host build runs it with COMPILE_GC, no collection until its heap
# nears 2 GiB (GOGC=off with a soft GOMEMLIMIT: a compile that gets there
# collects), and the tests' compiles and links get it through -toolexec,
# so the tests and what they start run at Go's default. The Dockerfile's
# Go stages set the same themselves (ENV): `docker compose up` builds
# them without make. `env GOCACHE=$(mktemp -d) SETTING CGO_ENABLED=0 go
# build -trimpath '-gcflags=all=-dwarf=false -c=1' $(grep -v '^#'
# image-deps.txt)`, alternating, idle paravirtualised host: GOGC=400 194,
# 215 CPU-s (max RSS 825, 905 MB); GOGC=800 182, 178 (985, 1017 MB);
# GOGC=off GOMEMLIMIT=2GiB 170, 174 (1485 MB both). Earlier, CoreDNS,
# three builds each way: 134 CPU-s at GOGC=100, 112 at 400.
COMPILE_GC ?= GOGC=off GOMEMLIMIT=2GiB
# Nor does any build here keep the compiler's DWARF: every binary links
# with -w (the images' with -s -w too), which drops it, and a stack trace
# or a race report reads the symbol table, not DWARF. And each compile runs
# its back end on one thread (-c=1, where go build gives it two here):
# with several packages compiling at once the threads only contend.
# go build -trimpath -ldflags "-s -w" ./cmd/elector from an empty build
# cache, idle machine: 136.2 CPU-s (72.2 s) as Go sets it, 125.2 (65.6 s)
# without DWARF, 120.5 (64.4 s) with -c=1 too. The Dockerfile's Go stages
# set the same (ENV GOFLAGS).
COMPILE_FLAGS = '-gcflags=all=-dwarf=false -c=1'
GOBUILD = $(COMPILE_GC) CGO_ENABLED=0 $(GO) build -trimpath $(COMPILE_FLAGS)
TOOLEXEC = -toolexec 'env $(COMPILE_GC)' $(COMPILE_FLAGS)
# ringside from this checkout, compiled that way (make build) and run at
# Go's default, and every command it starts taken from there too
# (RINGSIDE_BINARIES): one static build of ./cmd/..., as the images build
# them. `go run` of ringside compiled client-go and the rest with cgo and
# full paths, and the experiments compiled them all again, static and
# -trimpath, for the commands they start: from an empty build cache 241 s
# of wall time here against 127 s for make build (459 against 243 CPU-s).
RINGSIDE = RINGSIDE_BINARIES=$(CURDIR)/bin bin/ringside

.PHONY: build test race-deps ringside-binaries image-deps experiments lint bench kube-tools compose-v2 base-images stack-images stack-images-v2 stack-images-v1 ringnode-image compose-ring lb-images compose-lb compose-lb-down elector-image kind kind-node-base kind-node-image kind-up kind-deploy kind-experiments runner-image kind-down clean print-test-prereqs deps-stage

build:
	$(GOBUILD) -o bin/ ./cmd/...

# The kube tests run a real kube-apiserver and etcd, built by kube-tools;
# the compose tests run docker-compose 1.29 and compose v2 (compose-v2) and
# build the Dockerfile's images from the public bases (base-images); the
# stack test runs `docker compose up experiments` (stack-images); the kind
# test creates the paper's cluster from the node image and runs the
# elector image in it (kind, kind-node-image, elector-image). TOOLS_FROM=images
# takes Kubernetes' components and etcd from the images the stack builds
# anyway instead of compiling them on the host too (see kube-tools).
# The prerequisites build side by side (-j3): debootstrap and the images'
# apt steps wait on the network and disk while the Go builds use the CPU.
# go test's default 10-minute limit per package is too short for the stack
# test on a loaded 2-core machine (it builds images, then runs
# experiments): 30 minutes.
# The kind test (./k8s, 332–476 s in .ci/run on one machine, 852 s on a slower one) mostly waits on its cluster's
# containers; in go test's package order it started last, alone for its
# last six minutes. It comes first on go test's command line, which makes
# it the first package built and the first run (go test starts its test
# binaries in command-line order), and the rest build and run beside it
# (-p 3: the kind test and two others at once). The other long packages
# follow it, longest first (on a fresh machine's CI: compose 325 s,
# kubeexp 166 s, ringnodes 61 s, ringnet 58 s, lbexp 55 s, ringsim 46 s):
# in package order kubeexp started ten minutes in and ran 2.5 minutes
# after everything else had ended. One go test process for
# every package: two, on an empty build cache, each compiled the 1,073
# packages their tests share. go vet runs last, with -race: it then reads
# what the tests compiled, where a plain go vet beside them compiled every
# package once more without the race detector (its flags must match the
# tests' for that), and go test's own vet is off: go vet runs every check
# of it on the same packages, test files included. The test binaries link
# without DWARF (-w; a race report or a panic still names every frame):
# `go test -race -c` of every package on a warm build cache, which then
# only links, took 159 CPU-s here, 117 with -w. Before go test, make
# race-deps compiles every package the tests import, alone: on an empty
# build cache go test compiled and linked everything in 430 and 502 CPU-s
# (220 and 258 s) on a paravirtualised host, race-deps and then go test
# in 380 and 405 (195 and 208 s); why is not measured (race-deps at -p 3,
# go test's, took 287 CPU-s against 271 and 251 at its own -p 2). The kind
# test then starts after all of them, not after its own; the tests phase
# was shorter all the same (docs/timings.md, rows ²⁰ to ²²).
TEST_PREREQS = TOOLS_FROM=images kube-tools compose-v2 base-images ringside-binaries stack-images kind kind-node-image elector-image
LONG_TEST_PKGS = ./k8s ./compose ./experiments/kubeexp ./experiments/backend/ringnodes ./experiments/ringnet ./experiments/lbexp ./experiments/ringsim
# The tests start ringside's commands as processes and put them in images
# (internal/imagebuild.Static): they take them from ringside-binaries,
# built from this checkout just before, instead of compiling every command
# and its dependencies once more on the host without the race detector.
# The race detector needs cgo, and with cgo kustomize's Go plugin loader
# (plugin, which k8s and the commands that render manifests import) made
# the linker hand seven test binaries to gcc: the kind test's linked in
# 8.1–8.2 CPU-s, 5.0–5.3 with its tag, which drops that loader — as every
# image's static build (no cgo) has it: a plugin loader that cannot load
# (docs/timings.md).
RACE_BUILD = -race -tags=kustomize_disable_go_plugin_support $(TOOLEXEC)
test:
	$(MAKE) -j3 --output-sync=target $(TEST_PREREQS)
	$(MAKE) --no-print-directory race-deps
	RINGSIDE_BINARIES=$(CURDIR)/$(BINARIES) $(GO) test $(RACE_BUILD) -ldflags=-w -vet=off -p 3 -timeout 30m $(LONG_TEST_PKGS) $$($(GO) list ./... | grep -vxF "$$($(GO) list $(LONG_TEST_PKGS))")
	$(GO) vet $(RACE_BUILD) ./...

# Every package the tests import, compiled as make test compiles it (race
# detector, RACE_BUILD) into Go's build cache, nothing linked; the test
# binaries' own packages, with their test files, are left to go test.
# make test runs it first; a fresh machine's .ci/run also starts it beside
# the tools and images, on the CPU they leave idle (tools/idle.sh), and
# stops it when they end.
race-deps:
	$(GO) build $(RACE_BUILD) $$($(GO) list -deps -test -f '{{if and (not .ForTest) (ne .Name "main")}}{{.ImportPath}}{{end}}' ./...)

print-test-prereqs:
	@echo $(TEST_PREREQS)

# Every experiment of the catalogue on its default backend and quick profile.
experiments: kube-tools build
	$(RINGSIDE) run all --out $(RESULTS)
	$(RINGSIDE) report $(RESULTS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Kubernetes v1.32 from the Go module proxy (tools/kubernetes): every
# component in one build (≈4.5 min cold here), into bin/ by version;
# kube-apiserver and etcd 3.5 run the kube tests (see tools/README.md),
# the rest goes into the kind node image.
KUBE_BIN = bin/kubernetes-$(KUBE_VERSION)
KUBE_COMPONENTS = kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl
kube-tools: bin/kube-apiserver bin/etcd

# Replaced by rename, not overwritten: a kube-apiserver still running
# from bin/ makes cp fail with "Text file busy".
bin/kube-apiserver: $(KUBE_BIN)/.built
	cp $(KUBE_BIN)/kube-apiserver $@.tmp && mv -f $@.tmp $@

# TOOLS_FROM=images (make test's choice) takes Kubernetes' components and
# etcd from the Dockerfile's stages instead of compiling them on the host:
# the stack's images compile kube-apiserver and etcd there anyway (the
# kubernetes target adds the other six on kube-apiserver's build cache,
# and docker-compose 1.29 builds the etcd image): byte-identical binaries,
# compiled once, where a fresh machine compiled them twice (.ci/run's tools
# and images phase: 1070 s before, 839 s after, on one machine). The
# kubernetes target needs no compose v2 (tools/buildkit-build.sh), so it
# starts as soon as the deps stage it builds on exists. The default, host, needs
# nothing but Go (make experiments).
TOOLS_FROM ?= host
ifeq ($(TOOLS_FROM),images)
$(KUBE_BIN)/.built: tools/kubernetes/go.mod | deps-stage
	$(call stage-files,kubernetes,ringside/kubernetes:$(KUBE_VERSION),/kubernetes/.,$(KUBE_BIN),tools/kubernetes $(DEPS_STAGE_FILES))
	touch $@

bin/etcd: tools/etcd/go.mod | stack-images-v1
	$(call image-files,ringside/etcd:dev,/etcd,$@)
else
$(KUBE_BIN)/.built: tools/kubernetes/go.mod
	cd tools/kubernetes && $(GOBUILD) \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)" \
		-o ../../$(KUBE_BIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_COMPONENTS))
	touch $@

bin/etcd: tools/etcd/go.mod
	cd tools/etcd && $(GOBUILD) -ldflags "-s -w" -o ../../bin/etcd go.etcd.io/etcd/server/v3
endif

# $(call compose-build,SERVICE,TARGET,IMAGE): one target of the Dockerfile
# built by compose v2 (BuildKit), so that it shares the build stages the
# stack's images compiled (the classic builder would compile them again).
compose-build = printf 'services:\n  $(1):\n    build: {context: ., target: $(2)}\n    image: $(3)\n' | \
	docker compose -p ringside-images -f - build -q $(1)

# $(call image-files,IMAGE,PATH,DEST): PATH of an image's files copied to
# DEST on the host (a container is created, never started).
image-files = mkdir -p $(dir $(3)) && id=$$(docker create $(1) /none) && \
	{ docker cp $$id:$(2) $(3); rc=$$?; docker rm $$id >/dev/null; exit $$rc; }

# $(call stage-files,STAGE,IMAGE,PATH,DEST,FILES): the Dockerfile's STAGE
# built by the engine's BuildKit from FILES (tools/buildkit-build.sh: no
# compose v2 needed), tagged IMAGE, and its PATH copied to DEST.
stage-files = tools/buildkit-build.sh $(1) $(2) $(5) && $(call image-files,$(2),$(3),$(4))

# CoreDNS at the version kubeadm names, for the node image, with the
# plugins a kubeadm cluster's Corefile uses (tools/coredns/main.go).
COREDNS_VERSION ?= v1.11.3
# With TOOLS_FROM=images it is the Dockerfile's coredns stage, on the
# deps stage's build cache (tools/coredns requires ringside's versions of
# client-go and the rest), where the host compiled them all once more.
ifeq ($(TOOLS_FROM),images)
bin/coredns-$(COREDNS_VERSION): tools/coredns/main.go tools/coredns/go.mod | deps-stage
	$(call stage-files,coredns,ringside/coredns:$(COREDNS_VERSION),/coredns,$@,tools/coredns $(DEPS_STAGE_FILES))
else
bin/coredns-$(COREDNS_VERSION): tools/coredns/main.go tools/coredns/go.mod
	cd tools/coredns && $(GOBUILD) -ldflags "-s -w" -o ../../$@ .
endif

# Compose v2 from the Go module proxy (tools/compose), built once into bin/
# by version and installed as the docker CLI plugin beside Debian's
# docker-compose 1.29, so both are tested.
compose-v2: bin/docker-compose-$(COMPOSE_VERSION)
	mkdir -p $(HOME)/.docker/cli-plugins
	install -m 0755 $< $(HOME)/.docker/cli-plugins/docker-compose

# With TOOLS_FROM=images it is the Dockerfile's compose-v2 stage, built by
# the engine's BuildKit (tools/buildkit-build.sh: no compose v2 or buildx
# needed), whose cache the stack's experiments image then finds: compose
# v2 compiled once, where a fresh machine compiled it on the host and again
# in the image (.ci/run's tools and images phase on one fresh machine:
# 782 s before, 706 s after). It starts from the deps stage, which has
# compiled the 426 packages of client-go, the API types and the rest that
# compose imports too (at ringside's versions: TestToolsShareRingsidesModules).
ifeq ($(TOOLS_FROM),images)
bin/docker-compose-$(COMPOSE_VERSION): tools/compose/go.mod | deps-stage
	$(call stage-files,compose-v2,ringside/compose-v2:$(COMPOSE_VERSION),/docker-compose,$@,tools/compose $(DEPS_STAGE_FILES))
else
bin/docker-compose-$(COMPOSE_VERSION):
	cd tools/compose && $(GOBUILD) \
		-ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$(COMPOSE_VERSION)" \
		-o ../../$@ github.com/docker/compose/v2/cmd
endif

# ringside's commands as its images have them (the Dockerfile's binaries
# stage), copied into bin/: make test's processes and images and the kind
# node image's podnet. Built by compose v2 (BuildKit) on the cache of the
# images' build stage, so the host compiles none of ringside's
# dependencies without the race detector (on a fresh machine: client-go
# and the rest, once more). The other images that need that stage come
# after it: two BuildKit sessions may compile it side by side.
BINARIES = bin/ringside-binaries
ringside-binaries: base-images compose-v2 deps-stage
	$(call compose-build,binaries,binaries,ringside/binaries:dev)
	rm -rf $(BINARIES)
	$(call image-files,ringside/binaries:dev,/ringside/.,$(BINARIES))

# The Dockerfile's deps stage: the packages of other modules that
# ringside's commands import, compiled once, before the builds that start
# from it (the binaries', Kubernetes' and CoreDNS' stages) — two BuildKit
# sessions that reach one stage at once may both compile it.
# A stage built on it sends these with its own files (buildkit-build.sh).
DEPS_STAGE_FILES = go.mod go.sum image-deps.txt
deps-stage: base-images
	tools/buildkit-build.sh deps ringside/deps:dev $(DEPS_STAGE_FILES)

# The public base images the Dockerfile and compose files name
# (golang:1.26-bookworm, debian:bookworm-slim, redis:7-bookworm), made
# locally: this machine has no registry. Kept by version; elsewhere they
# are simply pulled and this is not needed.
base-images:
	tools/base-images/build.sh

# The experiments stack's images, each built once as `up` would build it:
# make test builds them first, so that the stack test finds them cached
# instead of compiling beside the other tests. compose v2 (BuildKit) builds
# every service but etcd; from nothing the whole stack took 509.6 s here.
# docker-compose 1.29 builds with the engine's classic builder, which shares
# no cache with BuildKit (the whole stack again took 1345.6 s): it builds
# etcd, to exercise its build path, and both versions' stack tests run on
# these images. The two build side by side; when v2 built etcd too, 1.29
# compiled it again after, alone at the end of a fresh machine's
# prerequisites (4 min 27 s of 41 min 43 s).
stack-images: stack-images-v2 stack-images-v1
# With TOOLS_FROM=images the kubernetes target comes first: every build
# here competes for the CPU, and that one is on the way to the node image
# and the tests. Built side by side, the stack's took it from 6.3 to 9.8
# minutes on a fresh machine, and the prerequisites from 839 to 980 s.
stack-images-v2: base-images compose-v2 ringside-binaries $(if $(filter images,$(TOOLS_FROM)),$(KUBE_BIN)/.built)
	docker compose build -q $$(docker compose config --services | grep -vx etcd)
stack-images-v1: base-images
	docker-compose build -q etcd

# The packages of other modules ringside's commands import, which the
# Dockerfile compiles in a layer of their own (see there).
IMAGE_DEPS ?= image-deps.txt
IMAGE_DEPS_FORMAT = {{if and (not .Standard) .Module}}{{if ne .Module.Path "github.com/ringside/ringside"}}{{.ImportPath}}{{end}}{{end}}
image-deps:
	{ echo '# make image-deps: the packages of other modules ./cmd/... imports (Dockerfile, build stage)'; \
	  CGO_ENABLED=0 $(GO) list -deps -f '$(IMAGE_DEPS_FORMAT)' ./cmd/...; } > $(IMAGE_DEPS)

ringnode-image: base-images
	docker build -q --target ringnode -t $${RINGNODE_IMAGE:-ringside/ringnode:dev} .

# The ring's cluster secret, generated once into compose/.env (read by
# docker-compose from the compose file's folder).
compose/.env:
	umask 077; printf 'RINGNODE_SECRET=%s\nAGENT_TOKEN=%s\nREDIS_PASSWORD=%s\n' \
		$$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') $$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') \
		$$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') > $@

compose-ring: ringnode-image compose/.env
	docker-compose -f compose/ring.yml up -d --scale node=4

# Seed 004's stack: agent, balancer and worker images and Debian's Redis.
# The agent's feed token comes from compose/.env, made per checkout.
lb-images: base-images
	for b in agent balancer worker; do docker build -q --target $$b -t ringside/$$b:dev . >/dev/null || exit 1; done

compose-lb: lb-images compose/.env
	docker-compose -f compose/lb.yml up -d

# Workers the agent started are not the project's: remove them by label.
compose-lb-down:
	docker-compose -f compose/lb.yml down
	docker ps -aq --filter label=ringside.pool=$${LB_POOL:-ringside-lb} | xargs -r docker rm -f
	docker network rm $${LB_NETWORK:-ringside-lb} 2>/dev/null || true

# The BLD paper's cluster on kind (k8s/kind.yaml: one control plane, three
# workers), the elector sidecar FROM scratch loaded into it, and one
# application of five replicas electing with ALGORITHM (k8s/overlays/).
# kind-experiments runs every family's experiments on that cluster.
ALGORITHM ?= bld
KIND_CLUSTER ?= ringside
# k8s/kind.yaml is the paper's cluster; k8s/kind-join.yaml adds a fourth worker (kube-rebalance --cases join).
KIND_CONFIG ?= k8s/kind.yaml
KIND_KUBECONFIG ?= .kube/kind.kubeconfig
elector-image: base-images compose-v2 ringside-binaries
	$(call compose-build,elector,elector,ringside/elector:dev)

# The in-cluster runner and ring Pods' image (Dockerfile target runner):
# ringside cluster runs experiments in a Job from it.
runner-image: base-images compose-v2 ringside-binaries
	$(call compose-build,runner,runner,ringside/runner:dev)

# Every family's experiments on the kind cluster, into $(RESULTS)/kubernetes
# with one report: the kube election experiments (kube-*) from here with
# their candidates as Pods, the rest from a Job inside the cluster
# (ringside cluster) — the ring's servers a StatefulSet of ringnode Pods,
# lb-live's workers, balancer and Redis Pods too.
KIND_EXPERIMENTS ?= kube-distribution,kube-election-latency,kube-reelection,ring-failover,ring-join,kv-load,kv-chaos,lb-live
REDIS_IMAGE ?= redis:7-bookworm
comma := ,
KIND_LIST = $(subst $(comma), ,$(KIND_EXPERIMENTS))
KIND_IN_JOB = $(subst $(eval) ,$(comma),$(strip $(filter-out kube-%,$(KIND_LIST))))
kind-experiments: kind runner-image elector-image build
	$(call KIND_RUN,load docker-image ringside/runner:dev ringside/elector:dev $(REDIS_IMAGE) --name $(KIND_CLUSTER))
	for e in $(filter kube-%,$(KIND_LIST)); do \
		$(RINGSIDE) run $$e --backend kubernetes --kubeconfig $(KIND_KUBECONFIG) --out $(RESULTS)/kubernetes || exit 1; \
	done
	test -z "$(KIND_IN_JOB)" || $(RINGSIDE) cluster --kubeconfig $(KIND_KUBECONFIG) --out $(RESULTS)/kubernetes -- \
		run all --experiments $(KIND_IN_JOB) --prefer kubernetes
	$(RINGSIDE) report $(RESULTS)/kubernetes

# kind itself, from the Go module proxy (tools/kind), cached by version.
# KIND_NODE_IMAGE picks the node image: ringside's (kind-node-image, built
# here with no registry) by default; empty for kind's own kindest/node. Where the engine refuses `docker run --privileged` (this
# sandbox: no CAP_SYS_RESOURCE), kind runs with k8s/kindshim first on its
# PATH, which turns that flag into the capabilities the engine grants.
KIND_VERSION ?= v0.33.0
KIND = bin/kind-$(KIND_VERSION)
kind: $(KIND)

# With TOOLS_FROM=images it is the Dockerfile's kind stage, on golang's
# image, whose build cache has the standard library compiled as every
# stage compiles it: on the host kind compiled it for itself (a fresh
# machine's accounting, docs/timings.md row 23: kind on the host 46 CPU-s,
# the standard library in golang's image 42).
ifeq ($(TOOLS_FROM),images)
$(KIND): tools/kind/go.mod | base-images
	$(call stage-files,kind,ringside/kind:$(KIND_VERSION),/kind,$@,tools/kind)
else
$(KIND):
	cd tools/kind && $(GOBUILD) -ldflags "-s -w" -o ../../$@ sigs.k8s.io/kind
endif

# The node image for this machine, built with no registry (k8s/node/):
# Debian, systemd, containerd, the kubelet and every image kubeadm runs.
# Cached by a hash of its inputs; `make kind-up KIND_NODE_IMAGE=$(KIND_NODE_TAG)`.
KIND_NODE_TAG ?= ringside/kind-node:$(KUBE_VERSION)
KIND_NODE_IMAGE ?= $(KIND_NODE_TAG)
KUBECTL ?= $(KUBE_BIN)/kubectl
kind-node-image: base-images compose-v2 ringside-binaries kind-node-base $(KUBE_BIN)/.built bin/etcd bin/coredns-$(COREDNS_VERSION)
	KUBE_VERSION=$(KUBE_VERSION) KUBE_BIN=$(KUBE_BIN) ETCD=bin/etcd COREDNS=bin/coredns-$(COREDNS_VERSION) PODNET=$(BINARIES)/podnet \
		NODE_IMAGE=$(KIND_NODE_TAG) k8s/node/build.sh

# The node image's Debian packages (k8s/node/Dockerfile's base stage),
# installed while the Kubernetes components compile (it waits on the
# network and the disk): the node image's build finds the step cached.
kind-node-base: base-images
	docker build -q --target base -t ringside/kind-node-base:dev - < k8s/node/Dockerfile >/dev/null

KIND_RUN = if docker run --rm --privileged $${KIND_PROBE_IMAGE:-debian:bookworm-slim} true >/dev/null 2>&1; \
	then $(KIND) $(1); else PATH="$(CURDIR)/k8s/kindshim:$$PATH" $(KIND) $(1); fi

kind-up: kind $(if $(filter $(KIND_NODE_TAG),$(KIND_NODE_IMAGE)),kind-node-image)
	$(call KIND_RUN,create cluster --name $(KIND_CLUSTER) --config $(KIND_CONFIG) $(if $(KIND_NODE_IMAGE),--image $(KIND_NODE_IMAGE)))
	mkdir -p $(dir $(KIND_KUBECONFIG))
	$(call KIND_RUN,get kubeconfig --name $(KIND_CLUSTER)) > $(KIND_KUBECONFIG)

kind-deploy: kind elector-image $(KUBE_BIN)/.built
	$(call KIND_RUN,load docker-image ringside/elector:dev --name $(KIND_CLUSTER))
	$(KUBECTL) --kubeconfig $(KIND_KUBECONFIG) apply -k k8s/overlays/$(ALGORITHM)

kind-down: kind
	$(call KIND_RUN,delete cluster --name $(KIND_CLUSTER))

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(RESULTS)
