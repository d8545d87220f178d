#!/usr/bin/env bash
# Builds one target of the Dockerfile with the engine's own BuildKit, with
# nothing but curl: the Engine API's POST /build?version=2 with the build
# context as the request's tar body. The docker CLI runs BuildKit only
# through the buildx plugin, and compose v2, the other way, is itself
# built with this (make test), so before either exists this is the way to
# a BuildKit build — and BuildKit's cache, unlike the classic builder's,
# is the one compose v2's builds use:
# a stage built here is found cached when `docker compose build` reaches
# it (BuildKit keys a COPY by the content of what it copies, not by how
# the context arrived).
#
#   tools/buildkit-build.sh TARGET IMAGE PATH...
#
# PATH... are the context's files and folders, relative to the checkout:
# the ones TARGET's stages copy (the Dockerfile is always sent).
# BUILD_ARGS, a JSON object ({"COMPOSE_VERSION":"v2.40.3-x"}), sets build
# arguments: one a stage's RUN names makes that step build again, as when
# measuring a stage's compiles (docs/timings.md).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: $0 TARGET IMAGE PATH..." >&2; exit 2; }
target=$1 image=$2
shift 2
# Both go into the request's URL as they are.
for v in "$target" "$image"; do
  [[ $v =~ ^[A-Za-z0-9][A-Za-z0-9._/:-]*$ ]] || { echo "buildkit-build: \"$v\" is not a target or image name" >&2; exit 2; }
done
for p in "$@"; do
  [ -e "$p" ] || { echo "buildkit-build: no $p in the checkout" >&2; exit 2; }
done

# The engine's socket, as the docker CLI finds it.
sock=/var/run/docker.sock
case "${DOCKER_HOST:-}" in
  unix://*) sock=${DOCKER_HOST#unix://} ;;
  "") ;;
  *) echo "buildkit-build: DOCKER_HOST=$DOCKER_HOST is not a unix socket" >&2; exit 1 ;;
esac
command -v curl >/dev/null || { echo "buildkit-build: curl is not installed" >&2; exit 1; }
# curl percent-encodes BUILD_ARGS into the query itself (--url-query,
# curl 7.87 or later; -G cannot go with an upload).
query=()
if [ -n "${BUILD_ARGS:-}" ]; then
  [[ $BUILD_ARGS =~ ^\{.*\}$ ]] || { echo "buildkit-build: BUILD_ARGS=$BUILD_ARGS is not a JSON object" >&2; exit 2; }
  query=(--url-query "buildargs=$BUILD_ARGS")
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The answer is a stream of JSON messages: BuildKit's progress in them as
# protobuf, a failed step as an "error" message at the end (with HTTP 200);
# a request the engine refuses is an HTTP error with a "message".
if ! tar -c Dockerfile "$@" |
  curl -sS --fail-with-body --unix-socket "$sock" -X POST -H 'Content-Type: application/x-tar' -T - \
    "${query[@]}" "http://docker/build?version=2&target=$target&t=$image" >"$out"; then
  echo "buildkit-build: $target: the build request failed: $(head -c 2000 "$out")" >&2
  exit 1
fi
if grep -q '"error"' "$out"; then
  echo "buildkit-build: $target failed: $(grep -oE '"error":"([^"\\]|\\.)*"' "$out" | head -1)" >&2
  echo "buildkit-build: to see the step's own output: DOCKER_BUILDKIT=0 docker build --target $target ." >&2
  exit 1
fi
