#!/usr/bin/env bash
# Builds a Redis image FROM scratch out of Debian's redis-server and the
# shared libraries it links, for machines with no registry. Elsewhere,
# compose/lb.yml simply pulls redis:7-alpine (REDIS_IMAGE unset).
#   compose/redis-image.sh [IMAGE]        (default ringside/redis:local)
set -euo pipefail
image=${1:-ringside/redis:local}
bin=$(command -v redis-server) || { echo "redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/tmp" "$ctx/root/data"
cp "$(readlink -f "$bin")" "$ctx/root/usr/local/bin/redis-server"
# Every library the binary links, at the path the loader looks for it.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
  [ -n "$lib" ] || continue
  mkdir -p "$ctx/root$(dirname "$lib")"
  cp -L "$lib" "$ctx/root$lib"
done
cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
DOCKERFILE
docker build -q -t "$image" "$ctx" >/dev/null
echo "$image"
