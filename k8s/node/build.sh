#!/usr/bin/env bash
# Builds the kind node image with no registry (make kind-node-image):
#   1. the images kubeadm runs, from binaries built on the host
#      (images.Dockerfile, built by compose v2), tagged with the names
#      `kubeadm config images list` gives, and podnet, the pod network's
#      agent;
#   2. the node (Dockerfile) with those images saved in /kind/images.
# Inputs (make passes them): KUBE_VERSION, KUBE_BIN (kubelet, kubeadm,
# kubectl, the control plane), ETCD, COREDNS, PODNET (ringside's, as its
# images have it: make ringside-binaries), NODE_IMAGE (the tag).
# The image carries the label ringside.kind-node=<hash of every input>;
# one whose label matches is kept, so a second run costs seconds.
set -euo pipefail
cd "$(dirname "$0")"
: "${KUBE_VERSION:?}" "${KUBE_BIN:?}" "${ETCD:?}" "${COREDNS:?}" "${PODNET:?}" "${NODE_IMAGE:?}"
root=$(cd ../.. && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$root/$1" ;; esac; }
KUBE_BIN=$(abs "$KUBE_BIN") ETCD=$(abs "$ETCD") COREDNS=$(abs "$COREDNS") PODNET=$(abs "$PODNET")

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/bin" "$ctx/kind/images"
for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl; do
  cp "$KUBE_BIN/$b" "$ctx/bin/"
done
cp "$ETCD" "$ctx/bin/etcd"
cp "$COREDNS" "$ctx/bin/coredns"
cp "$PODNET" "$ctx/bin/podnet"
gcc -static -Os -o "$ctx/bin/pause" pause.c

# The cache key: every binary, every file of the recipe and the Debian
# base the node and its images are built on.
base=$(docker image inspect -f '{{.Id}}' debian:bookworm-slim 2>/dev/null || echo none)
key=$( ( (cd "$ctx/bin" && sha256sum ./*); sha256sum Dockerfile images.Dockerfile pause.c build.sh; find files kind -type f -exec sha256sum {} +; echo "$base") | sort | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{index .Config.Labels "ringside.kind-node"}}' "$NODE_IMAGE" 2>/dev/null)" = "$key" ]; then
  echo "kind-node-image: $NODE_IMAGE is up to date ($key)" >&2
  exit 0
fi

# name=target for every image kubeadm will run.
images=()
while read -r ref; do
  name=${ref##*/}; name=${name%%:*}
  case $name in
    kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy | etcd | pause | coredns) images+=("$ref=$name") ;;
    *) echo "kind-node-image: kubeadm names an image this recipe does not build: $ref" >&2; exit 1 ;;
  esac
done < <("$ctx/bin/kubeadm" config images list --kubernetes-version "$KUBE_VERSION")
images+=("ringside/podnet:dev=podnet")

# One compose v2 build (BuildKit) for all of them, side by side, each
# building only the stages its target needs: a docker build per image (the
# classic builder) sent the whole 650 MB folder eight times and built every
# stage before its target (31 s against 7 s on an idle machine).
refs=() services=""
for i in "${images[@]}"; do
  ref=${i%%=*} target=${i#*=}
  printf -v service '  %s:\n    build: {context: "%s", dockerfile: "%s", target: %s}\n    image: "%s"\n' \
    "$target" "$ctx/bin" "$PWD/images.Dockerfile" "$target" "$ref"
  services+=$service
  refs+=("$ref")
done
printf 'services:\n%s' "$services" | docker compose -p ringside-node-images -f - build -q
# The control plane's images run on control-plane nodes only: a worker
# leaves their tar unimported (files/kind-images): 4 of the 8 images every
# node unpacked at boot.
node_refs=() cp_refs=()
for i in "${images[@]}"; do
  case ${i#*=} in
    kube-apiserver | kube-controller-manager | kube-scheduler | etcd) cp_refs+=("${i%%=*}") ;;
    *) node_refs+=("${i%%=*}") ;;
  esac
done
docker save "${node_refs[@]}" -o "$ctx/kind/images/node.tar"
docker save "${cp_refs[@]}" -o "$ctx/kind/images/control-plane.tar"

cp -r kind/manifests "$ctx/kind/"
printf '%s' "$KUBE_VERSION" >"$ctx/kind/version"
cp -r files Dockerfile "$ctx/"
docker build -q --label ringside.kind-node="$key" -t "$NODE_IMAGE" "$ctx" >/dev/null
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$NODE_IMAGE"
