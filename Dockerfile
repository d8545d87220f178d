# Every ringside image, one target each, built the usual multi-stage way:
# a Go builder stage, then a scratch (or Debian-slim) final stage.
#
#   docker build --target ringnode -t ringside/ringnode:dev .
#   docker compose up experiments        (builds what it needs)
#
# GO_IMAGE and BASE_IMAGE are the public golang and Debian images; on a
# machine with no registry `make base-images` creates the same names
# locally. No BuildKit-only syntax: compose v1.29 builds with the engine's
# classic builder (compose v2 with the BuildKit it embeds).
#
# Every Go stage compiles with GOGC=off and GOMEMLIMIT=2GiB, the
# Makefile's COMPILE_GC (see there: no collection below a 2 GiB heap,
# 13-19 % less compile CPU than GOGC=400). It is the compiler's setting
# only: every final image is FROM scratch or Debian, so nothing built here
# runs with it. And without the compiler's DWARF, its back end on one
# thread (GOFLAGS, the Makefile's COMPILE_FLAGS: 11 % less). Keep GOFLAGS
# one value on every ENV line: on a machine with no registry, make
# base-images compiles the standard library into golang's image with it,
# and every stage then finds it in the build cache.
ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

# etcd and kube-apiserver from the Go module proxy, as make kube-tools
# builds them (tools/README.md). etcd comes first: the engine's classic
# builder (docker-compose 1.29) builds every stage before its target, and
# make test has it build etcd alone, which changes only with tools/etcd.
FROM ${GO_IMAGE} AS etcd-build
ENV GOGC=off GOMEMLIMIT=2GiB GOFLAGS="'-gcflags=all=-dwarf=false -c=1'"
COPY tools/etcd/ /src/tools/etcd/
WORKDIR /src/tools/etcd
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/etcd go.etcd.io/etcd/server/v3

FROM scratch AS etcd
COPY --from=etcd-build /out/etcd /etcd
EXPOSE 2379
USER 65532
ENTRYPOINT ["/etcd"]

# The packages of other modules ringside's commands import, compiled in a
# stage of their own, kept while go.mod, go.sum and image-deps.txt stay the
# same: a change to ringside's code then compiles ringside's packages only
# (35 s here for the runner's stage, against 3 min 8 s when every
# dependency compiled again). Same flags as the builds below, so its
# compiles are the cache's. `make image-deps` writes the list;
# TestImageDepsAreCurrent fails when it is stale. Kubernetes', CoreDNS' and
# compose v2's stages start from here too: tools/kubernetes, tools/coredns
# and tools/compose require the versions ringside does
# (TestToolsShareRingsidesModules), so client-go, the API types and the
# rest they share compile once, not once for each.
FROM ${GO_IMAGE} AS deps
ENV GOGC=off GOMEMLIMIT=2GiB GOFLAGS="'-gcflags=all=-dwarf=false -c=1'"
WORKDIR /src
COPY go.mod go.sum image-deps.txt ./
RUN go mod download
RUN grep -v '^#' image-deps.txt | CGO_ENABLED=0 xargs go build -trimpath

# ringside's binaries. The source commit goes into meta.json.
FROM deps AS build
COPY . .
RUN git config --global --add safe.directory /src \
 && commit=$(git rev-parse HEAD 2>/dev/null || echo unknown) \
 && if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit-dirty"; fi \
 && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-X github.com/ringside/ringside/experiments.BuildCommit=$commit" -o /out/ ./cmd/... \
 && mkdir /data

# Every image runs as 65532 (distroless' "nonroot") with a /data folder it
# owns, as internal/imagebuild makes them — but the agent, which uses the
# Docker socket (only root, or the host's docker group, may), and the
# experiments runner (the Docker socket, and results handed to the owner
# of the checkout).

FROM scratch AS ringnode
COPY --from=build --chown=65532:65532 /data /data
COPY --from=build /out/ringnode /ringnode
EXPOSE 7000
USER 65532
ENTRYPOINT ["/ringnode"]

FROM scratch AS agent
COPY --from=build /out/agent /agent
EXPOSE 8081
ENTRYPOINT ["/agent"]

FROM scratch AS balancer
COPY --from=build --chown=65532:65532 /data /data
COPY --from=build /out/balancer /balancer
EXPOSE 8080
USER 65532
ENTRYPOINT ["/balancer"]

FROM scratch AS worker
COPY --from=build --chown=65532:65532 /data /data
COPY --from=build /out/worker /worker
EXPOSE 8080
USER 65532
ENTRYPOINT ["/worker"]

# The elector sidecar, the ringside.io/balanced strategy controller that
# its cle-balanced candidates need (k8s/overlays/cle-balanced runs it with
# command /cle-balanced), and what kube-split-brain's Pods run beside the
# elector: the leader-based application (/leaderapp) and the relay that
# delays the elector's API requests (/faultproxy). One image, so that a
# cluster runs every kube experiment once it is loaded.
FROM scratch AS elector
COPY --from=build /out/elector /elector
COPY --from=build /out/cle-balanced /cle-balanced
COPY --from=build /out/leaderapp /leaderapp
COPY --from=build /out/faultproxy /faultproxy
EXPOSE 4040
USER 65532
ENTRYPOINT ["/elector"]

FROM scratch AS leaderapp
COPY --from=build /out/leaderapp /leaderapp
EXPOSE 8080
USER 65532
ENTRYPOINT ["/leaderapp"]

# The experiment runner inside a Kubernetes cluster (ringside cluster) and,
# as `ringside podfault` supervising ringnode, the ring experiments' Pods
# there, and lb-live's workers (/worker) and balancers (/balancer): one
# image to load into a cluster.
FROM scratch AS runner
COPY --from=build --chown=65532:65532 /data /data
COPY --from=build /out/ringside /ringside
COPY --from=build /out/ringnode /ringnode
COPY --from=build /out/worker /worker
COPY --from=build /out/balancer /balancer
USER 65532
ENTRYPOINT ["/ringside"]

# Every ringside command, for the host (make ringside-binaries): the tests'
# processes and images (internal/imagebuild, RINGSIDE_BINARIES) and the
# kind node image's podnet, compiled once on the build cache the images
# share instead of once more on the host.
FROM scratch AS binaries
COPY --from=build /out/ /ringside/

# kube-apiserver, as make kube-tools builds it, on the deps stage's cache.
FROM deps AS kube-apiserver-build
ARG KUBE_VERSION=v1.32.13
COPY tools/kubernetes/ /src/tools/kubernetes/
WORKDIR /src/tools/kubernetes
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}" \
      -o /out/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

# The API server under `ringside kube serve`, which makes its PKI and admin
# token at start, creates the paper's three worker nodes and hands the
# kubeconfig to the stack.
FROM scratch AS kube-apiserver
COPY --from=kube-apiserver-build /out/kube-apiserver /usr/local/bin/kube-apiserver
COPY --from=build /out/ringside /usr/local/bin/ringside
ENV RINGSIDE_KUBE_BIN=/usr/local/bin
EXPOSE 6443
USER 65532
ENTRYPOINT ["/usr/local/bin/ringside", "kube", "serve"]

# Compose v2 for the compose backend, standalone (no docker CLI in the image),
# on the deps stage's cache: tools/compose requires ringside's versions of
# client-go, the API types, protobuf and the rest both import
# (TestToolsShareRingsidesModules), so those 426 packages compile once.
FROM deps AS compose-build
ARG COMPOSE_VERSION=v2.40.3
COPY tools/compose/ /src/tools/compose/
WORKDIR /src/tools/compose
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=${COMPOSE_VERSION}" \
      -o /out/docker-compose github.com/docker/compose/v2/cmd

# compose v2 alone: make test's CLI plugin (tools/buildkit-build.sh builds
# this target with BuildKit, whose cache the experiments image then finds).
FROM scratch AS compose-v2
COPY --from=compose-build /out/docker-compose /docker-compose

# The experiment runner: ringside and the binaries its backends start
# (electors as processes, ringnode and worker images built from them),
# compose v2, and nginx and wrk for the balancer's baseline.
FROM ${BASE_IMAGE} AS experiments
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx-light wrk \
 && rm -rf /var/lib/apt/lists/*
COPY --from=compose-build /out/docker-compose /usr/local/bin/docker-compose
COPY --from=build /out/ /usr/local/lib/ringside/
ENV RINGSIDE_BINARIES=/usr/local/lib/ringside RINGSIDE_COMPOSE=v2 RINGSIDE_IN_CONTAINER=1 \
    PATH=/usr/local/lib/ringside:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /results
ENTRYPOINT ["ringside", "stack"]

# Kubernetes' other components for the kind node image. make test takes
# all seven from here (make kind-node-image with TOOLS_FROM=images): the
# stack's kube-apiserver stage has already compiled nearly all their
# packages (and found those ringside shares in the deps stage's cache),
# and its build cache is in that stage's layer, so they cost a few
# minutes more instead of a second Kubernetes build on the host. Last
# in the file, so that the classic builder, which builds every stage
# before its target, never builds it for the stack.
FROM kube-apiserver-build AS kubernetes-build
ARG KUBE_VERSION=v1.32.13
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}" \
      -o /out/ k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm \
      k8s.io/kubernetes/cmd/kubectl

FROM scratch AS kubernetes
COPY --from=kubernetes-build /out/ /kubernetes/

# CoreDNS for the kind node image (make kind-node-image with
# TOOLS_FROM=images), on the deps stage's cache: the kubernetes plugin's
# client-go is ringside's.
FROM deps AS coredns-build
COPY tools/coredns/ /src/tools/coredns/
WORKDIR /src/tools/coredns
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/coredns .

FROM scratch AS coredns
COPY --from=coredns-build /out/coredns /coredns

# kind for make test (make kind with TOOLS_FROM=images), on golang's image:
# its build cache holds the standard library compiled with these flags,
# which a build on the host compiled once more for kind alone.
FROM ${GO_IMAGE} AS kind-build
ENV GOGC=off GOMEMLIMIT=2GiB GOFLAGS="'-gcflags=all=-dwarf=false -c=1'"
COPY tools/kind/ /src/tools/kind/
WORKDIR /src/tools/kind
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/kind sigs.k8s.io/kind

FROM scratch AS kind
COPY --from=kind-build /out/kind /kind
