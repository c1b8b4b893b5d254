#!/usr/bin/env bash
# A Docker engine for CI's container-broker tests.
#
#   .ci/docker-engine.sh start   when no engine answers at DOCKER_HOST and we run as root: install
#                                docker.io if dockerd is missing, start dockerd in the background,
#                                wait until it answers, and record its pid
#   .ci/docker-engine.sh stop    stop the dockerd that `start` started (by its recorded pid), if any
#
# An engine that already answers is used and never stopped. Not root and no engine: nothing is
# started and the tests run the broker as a process. Environment (defaults in brackets):
#   DOCKER_HOST        the engine's socket [unix:///var/run/docker.sock]
#   SDSL_DOCKER_STATE  directory for the recorded pid, dockerd's pidfile and log [/tmp/streamsdsl-ci-docker]
#   SDSL_DOCKERD_ARGS  extra dockerd arguments, e.g. "--data-root DIR --exec-root DIR" for a private engine
set -euo pipefail

host="${DOCKER_HOST:-unix:///var/run/docker.sock}"
state="${SDSL_DOCKER_STATE:-/tmp/streamsdsl-ci-docker}"
marker="$state/started.pid"
log="$state/dockerd.log"

say() { echo "docker-engine: $*" >&2; }

answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker -H "$host" version >/dev/null 2>&1; }

start() {
    if answers; then
        say "a Docker engine answers at $host: using it (and leaving it running)"
        rm -f "$marker"  # a pid recorded by an earlier run is not ours to stop
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        say "no Docker engine answers at $host and not root: the integration tests run the broker as a process"
        return 0
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
        say "installing docker.io (apt-get)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq docker.io >/dev/null
    fi
    mkdir -p "$state"
    case "$host" in
        unix://*) ;;
        *) say "DOCKER_HOST=$host is not a unix socket: cannot start an engine there"; return 1 ;;
    esac
    # shellcheck disable=SC2086 # SDSL_DOCKERD_ARGS is a list of arguments
    dockerd -H "$host" --pidfile "$state/dockerd.pid" ${SDSL_DOCKERD_ARGS:-} </dev/null >"$log" 2>&1 &
    echo $! >"$marker"
    say "started dockerd (pid $(cat "$marker"), log $log); waiting for it to answer at $host"
    for _ in $(seq 1 120); do
        if answers; then
            say "dockerd answers at $host"
            return 0
        fi
        if ! kill -0 "$(cat "$marker")" 2>/dev/null; then
            say "dockerd exited before answering; the end of $log:"
            tail -n 20 "$log" >&2 || true
            rm -f "$marker"
            return 1
        fi
        sleep 0.5
    done
    say "dockerd did not answer within 60 s; the end of $log:"
    tail -n 20 "$log" >&2 || true
    return 1
}

stop() {
    [ -f "$marker" ] || return 0
    pid="$(cat "$marker")"
    if kill -0 "$pid" 2>/dev/null; then
        say "stopping dockerd (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "dockerd (pid $pid) still running after 30 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$marker"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
