#!/usr/bin/env bash
# Starts the Docker engine when it does not answer, and waits until it
# does (at most a minute). .ci/run calls it first: a machine of this kind
# starts its engine before a session, but an engine a session restarted
# (tools/engine-overlay2.sh) ends with the session's processes, so the CI
# run that follows on the same machine finds none. With systemd the unit
# is started; otherwise the engine is started as Debian's init script
# starts it, in its own session, with the limits this shell has (that
# script's `ulimit -u unlimited` is refused in this sandbox).
set -euo pipefail

say() { echo "engine-start: $*" >&2; }

answers() { docker info >/dev/null 2>&1; }

answers && exit 0
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  say "starting docker.service"
  systemctl start docker
else
  say "starting dockerd (log: /var/log/docker.log)"
  setsid start-stop-daemon --start --background --no-close --exec /usr/sbin/dockerd \
    --pidfile /var/run/docker-ssd.pid --make-pidfile -- -p /var/run/docker.pid >> /var/log/docker.log 2>&1
fi
for _ in $(seq 120); do
  answers && { say "the engine answers"; exit 0; }
  sleep 0.5
done
say "the engine did not answer within a minute; the end of /var/log/docker.log:"
tail -20 /var/log/docker.log >&2 || true
exit 1
