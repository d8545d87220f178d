#!/usr/bin/env bash
# Creates, on a machine with no registry, the public base images the
# Dockerfiles name, under the same names (DESIGN §6):
#   debian:bookworm-slim   debootstrap --variant=minbase from the apt mirror,
#                          made slim as Debian's published image is
#   golang:1.26-bookworm   that base, git and this machine's Go toolchain
#   redis:7-bookworm       that base and Debian's redis-server
# Elsewhere nothing here is needed: docker pulls the real ones. Each image
# carries the label ringside.base=<what it was made from>; one whose label
# already matches is kept, so a second run costs seconds.
set -euo pipefail
cd "$(dirname "$0")"

# The Debian mirror: DEBIAN_MIRROR, else the one this machine's apt uses
# (deb822 debian.sources, or a one-line `deb URL bookworm …` entry). No
# mirror is written here: the tree names no registry.
apt_mirror() {
  local f m
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    m=$(awk '/^URIs:/ {print $2; exit} $1 == "deb" && $3 ~ /^bookworm/ {print $2; exit}' "$f")
    if [ -n "$m" ]; then echo "$m"; return 0; fi
  done
  return 0
}
mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
# The GOFLAGS every Go stage of the Dockerfile compiles with (one value on
# all its ENV lines), for the standard library golang's image compiles.
std_goflags=$(sed -n 's/^ENV .*GOFLAGS="\([^"]*\)".*/\1/p' ../../Dockerfile | sort -u)
if [ -z "$std_goflags" ] || [ "$(printf '%s\n' "$std_goflags" | wc -l)" -ne 1 ]; then
  echo "base-images: the Dockerfile's Go stages must set one GOFLAGS value on their ENV lines, found: ${std_goflags:-none}" >&2
  exit 1
fi
# The label names the toolchain, the trust store and the standard
# library's flags it was made with.
go_version="$(go env GOVERSION) ca:$(sha256sum /etc/ssl/certs/ca-certificates.crt | cut -c1-12) std:$std_goflags"

# slim ROOT: what makes Debian's published bookworm-slim image out of a
# debootstrapped tree (its build tool, debuerreotype, does the same): apt
# keeps no package cache or binary index in a layer and fetches no
# translations, dpkg skips fsync (a build step survives no power loss
# anyway) and installs no manuals, info pages, translations or documents
# but their copyright files, and those debootstrap already installed go.
# Without it every image that installs a package carried 78 MB of apt's
# index caches (podnet and kube-proxy of the kind node image, redis,
# experiments), and the kind nodes unpacked them at each boot.
slim() {
  local root=$1
  printf '#!/bin/sh\n# Services do not start inside image builds.\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
  printf 'force-unsafe-io\n' >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  local clean='"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true";'
  printf '%s\n' "DPkg::Post-Invoke { $clean };" "APT::Update::Post-Invoke { $clean };" \
    'Dir::Cache::pkgcache "";' 'Dir::Cache::srcpkgcache "";' >"$root/etc/apt/apt.conf.d/docker-clean"
  printf 'Acquire::GzipIndexes "true";\n' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
  printf 'Acquire::Languages "none";\n' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  printf 'Apt::AutoRemove::SuggestsImportant "false";\n' >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
  printf '%s\n' \
    'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/info/*' 'path-exclude /usr/share/linda/*' \
    'path-exclude /usr/share/lintian/overrides/*' 'path-exclude /usr/share/man/*' \
    'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
    'path-include /usr/share/locale/languages' 'path-include /usr/share/locale/all_languages' \
    'path-include /usr/share/locale/currency/*' 'path-include /usr/share/locale/l10n/*' \
    >"$root/etc/dpkg/dpkg.cfg.d/docker"
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -path "$root/usr/share/doc/*/copyright" -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias ! -name languages \
    ! -name all_languages ! -name currency ! -name l10n -exec rm -rf {} +
  rm -rf "$root"/usr/share/info/* "$root"/usr/share/linda/* "$root"/usr/share/lintian/overrides/* "$root"/usr/share/man/*
}

# have NAME LABEL: the image exists and was made from LABEL.
have() { [ "$(docker image inspect -f '{{index .Config.Labels "ringside.base"}}' "$1" 2>/dev/null)" = "$2" ]; }

if ! have debian:bookworm-slim "debootstrap bookworm, slim"; then
  if [ -z "$mirror" ]; then
    echo "base-images: no Debian mirror: set DEBIAN_MIRROR, or give apt one (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list)" >&2
    exit 1
  fi
  command -v debootstrap >/dev/null || { echo "base-images: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  echo "base-images: debootstrap bookworm from $mirror" >&2
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  slim "$root"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | docker import \
    --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'LABEL ringside.base="debootstrap bookworm, slim"' \
    - debian:bookworm-slim >/dev/null
  rm -rf "$root"
  trap - EXIT
fi

# The images built on the base name it in their labels: a new base
# rebuilds them.
base="debian:$(docker image inspect -f '{{.Id}}' debian:bookworm-slim | cut -d: -f2 | cut -c1-12)"
golang_label="$go_version $base"

# redis is built beside golang, the one every Go build of the Dockerfile
# waits for.
redis=
if ! have redis:7-bookworm "redis-server $base"; then
  docker build -q --label ringside.base="redis-server $base" -t redis:7-bookworm -f redis.Dockerfile . >/dev/null &
  redis=$!
fi
if ! have golang:1.26-bookworm "$golang_label"; then
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  cp -a "$(go env GOROOT)" "$ctx/go"
  rm -rf "$ctx/go/pkg/obj" "$ctx/go/test"
  cp golang.Dockerfile "$ctx/Dockerfile"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  docker build -q --build-arg GO_VERSION="$(go env GOVERSION)" --build-arg STD_GOFLAGS="$std_goflags" --label ringside.base="$golang_label" -t golang:1.26-bookworm "$ctx" >/dev/null
  rm -rf "$ctx"
  trap - EXIT
fi

if [ -n "$redis" ] && ! wait "$redis"; then
  echo "base-images: building redis:7-bookworm failed" >&2
  exit 1
fi
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' debian:bookworm-slim golang:1.26-bookworm redis:7-bookworm 2>/dev/null || true
