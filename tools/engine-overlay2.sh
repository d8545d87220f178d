#!/usr/bin/env bash
# Moves the Docker engine from the fuse-overlayfs storage driver to
# overlay2 when the kernel's overlay filesystem works here (.ci/run runs it
# on a new machine). The engine this machine kind starts with uses
# fuse-overlayfs, so every file operation of every build step and
# container goes through a FUSE process in user space: on a fresh machine
# the prerequisites' builds spent more than a quarter of their CPU time in
# the kernel. overlay2 is the engine's default wherever the kernel has
# overlay, as it has here.
#
# Images made under one driver are not seen under the other, and the build
# cache is dropped: the switch costs a machine that cached its images under
# fuse-overlayfs one rebuild, once (their files stay in the engine's folder,
# under fuse-overlayfs/). The engine is restarted only when no
# container is running; should it not come back on overlay2, the old
# configuration is put back and the engine started again.
set -euo pipefail

say() { echo "engine-overlay2: $*" >&2; }

driver=$(docker info --format '{{.Driver}}')
if [ "$driver" != fuse-overlayfs ]; then
  say "the engine uses $driver: left as it is"
  exit 0
fi
root=$(docker info --format '{{.DockerRootDir}}')

# An overlay mount on the engine's own file system, as overlay2 makes them.
probe=$(mktemp -d "$root/overlay-probe.XXXXXX")
trap 'umount "$probe/m" 2>/dev/null || true; rm -rf "$probe"' EXIT
mkdir "$probe/l" "$probe/u" "$probe/w" "$probe/m"
if ! mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
  say "the kernel's overlay cannot be mounted here: the engine stays on fuse-overlayfs"
  exit 0
fi
umount "$probe/m"

running=$(docker ps -q | wc -l)
if [ "$running" -gt 0 ]; then
  say "$running containers are running: the engine is not restarted (it stays on fuse-overlayfs)"
  exit 0
fi

cfg=/etc/docker/daemon.json
saved=$(mktemp)
if [ -e "$cfg" ]; then cp -p "$cfg" "$saved"; else echo '{}' > "$saved"; fi

# set_driver FILE DRIVER: FILE with storage-driver DRIVER, every other
# setting kept.
set_driver() {
  python3 - "$1" "$2" "$cfg.tmp" <<'EOF'
import json, sys
src, driver, out = sys.argv[1:]
with open(src) as f:
    conf = json.load(f)
conf["storage-driver"] = driver
with open(out, "w") as f:
    json.dump(conf, f, indent=2)
EOF
  mv -f "$cfg.tmp" "$cfg"
}

# restart stops the engine and starts it with the configuration in $cfg
# (tools/engine-start.sh); true once it answers. Without systemd the
# engine was started from outside, not by its init script, so it is
# stopped by the pid it wrote.
restart() {
  if [ -d /run/systemd/system ]; then # booted with systemd (sd_booted(3))
    systemctl stop docker
  else
    pid=$(cat /var/run/docker.pid 2>/dev/null || pgrep -xo dockerd || true)
    if [ -n "$pid" ]; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      if kill -0 "$pid" 2>/dev/null; then say "the engine (pid $pid) did not stop"; return 1; fi
    fi
  fi
  "$(dirname "$0")/engine-start.sh"
}

mkdir -p "$(dirname "$cfg")"
set_driver "$saved" overlay2
if restart && [ "$(docker info --format '{{.Driver}}')" = overlay2 ]; then
  say "the engine now uses overlay2 (was fuse-overlayfs)"
  # BuildKit's records outlive the switch but name layers only the old
  # driver has: drop them (the images they made are gone from view too).
  docker builder prune -af >/dev/null
  rm -f "$saved"
  exit 0
fi
say "the engine did not come back on overlay2 (/var/log/docker.log): putting fuse-overlayfs back"
cp -p "$saved" "$cfg"
rm -f "$saved"
restart || { say "the engine did not start again"; exit 1; }
