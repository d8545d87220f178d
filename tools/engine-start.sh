#!/usr/bin/env bash
# Starts the Docker engine when it does not answer, and waits until it
# does. .ci/run calls it first: a machine of this kind starts its engine
# before a session, but an engine a session restarted
# (tools/engine-overlay2.sh) ends with the session's processes, so the CI
# run that follows on the same machine finds none. With systemd the unit
# is started; otherwise the engine is started as Debian's init script
# starts it, in its own session, with the limits this shell has (that
# script's `ulimit -u unlimited` is refused in this sandbox).
set -euo pipefail

say() { echo "engine-start: $*" >&2; }

answers() { docker info >/dev/null 2>&1; }

# alive NAME PID: PID is a running NAME (an exited process not yet reaped,
# a zombie, is not).
alive() {
  [ "$(cat "/proc/$2/comm" 2>/dev/null)" = "$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$2/status" 2>/dev/null
}

# drop_stale NAME FILE: removes the pid file FILE unless it names a running
# NAME. dockerd refuses to start beside a pid file whose process exists
# ("pid file found") and connects to the containerd its pid file names
# instead of starting one — and the engine a session's end killed may
# still be an unreaped zombie, which exists.
drop_stale() {
  [ -s "$2" ] || return 0
  local pid
  pid=$(cat "$2")
  alive "$1" "$pid" && return 0
  say "removing the stale $2 (pid $pid is no running $1)"
  rm -f "$2"
}

# wait_answer SECONDS: true once the engine answers; false when it does not
# within SECONDS or no dockerd is left running.
wait_answer() {
  local deadline=$((SECONDS + $1))
  while [ $SECONDS -lt $deadline ]; do
    answers && return 0
    pgrep -x dockerd >/dev/null || return 1
    sleep 0.5
  done
  return 1
}

answers && exit 0
pidfile=/var/run/docker.pid
if [ -s "$pidfile" ] && alive dockerd "$(cat "$pidfile")"; then
  say "dockerd (pid $(cat "$pidfile")) is running but does not answer yet: waiting"
  wait_answer 60 && { say "the engine answers"; exit 0; }
  say "it did not answer within a minute"
  exit 1
fi
for try in 1 2 3; do
  drop_stale dockerd "$pidfile"
  drop_stale containerd /var/run/docker/containerd/containerd.pid
  if [ -d /run/systemd/system ]; then # booted with systemd (sd_booted(3))
    say "starting docker.service (try $try)"
    systemctl start docker || true
  else
    say "starting dockerd (try $try; log: /var/log/docker.log)"
    setsid start-stop-daemon --start --background --no-close --exec /usr/sbin/dockerd \
      --pidfile /var/run/docker-ssd.pid --make-pidfile -- -p "$pidfile" >> /var/log/docker.log 2>&1 || true
  fi
  if wait_answer 60; then
    say "the engine answers"
    exit 0
  fi
  say "the engine did not come up; the end of /var/log/docker.log:"
  tail -5 /var/log/docker.log >&2 || true
  pkill -x dockerd 2>/dev/null || true
  sleep $((2 * try))
done
exit 1
