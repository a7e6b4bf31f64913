#!/usr/bin/env bash
# Make a Docker engine and the builder's base image available, without a
# registry. Idempotent: an engine that already answers and an image that
# already exists are left alone.
#
#   .ci/setup-docker.sh            # engine on the default socket + publisher-base:bookworm
#
# Environment:
#   DOCKER_HOST          use this engine (nothing is started when it answers)
#   PUBLISHER_BASE_IMAGE tag of the base image to create (publisher-base:bookworm)
#   DEBIAN_MIRROR        mirror for debootstrap (http://deb.debian.org/debian)
#   PUBLISHER_CI_CACHE   where the debootstrap root and the engine log live (/var/cache/publisher-ci)
set -euo pipefail

BASE_IMAGE="${PUBLISHER_BASE_IMAGE:-publisher-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${PUBLISHER_CI_CACHE:-/var/cache/publisher-ci}"
LOG="$CACHE/dockerd.log"
mkdir -p "$CACHE"

engine_up() { docker info >/dev/null 2>&1; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
  echo "setup-docker: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if engine_up; then
  echo "setup-docker: engine already running ($(docker info --format '{{.ServerVersion}}'))"
else
  echo "setup-docker: starting dockerd (log: $LOG)"
  # setsid: the engine must outlive this script and not share its process group.
  setsid nohup dockerd >"$LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    engine_up && break
    sleep 1
  done
  if ! engine_up; then
    echo "setup-docker: dockerd did not come up; last log lines:" >&2
    tail -n 30 "$LOG" >&2
    exit 1
  fi
  echo "setup-docker: engine up ($(docker info --format '{{.ServerVersion}}'))"
fi

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  echo "setup-docker: base image $BASE_IMAGE present"
  exit 0
fi

ROOTFS="$CACHE/bookworm-rootfs"
if [ ! -f "$ROOTFS/.complete" ]; then
  echo "setup-docker: debootstrap bookworm into $ROOTFS (about a minute)"
  rm -rf "$ROOTFS"
  debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
    tail -n 30 "$CACHE/debootstrap.log" >&2
    exit 1
  }
  touch "$ROOTFS/.complete"
fi
echo "setup-docker: importing $BASE_IMAGE"
# The engine provides /proc, /sys and /dev; the marker file is ours.
tar -C "$ROOTFS" --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* --exclude=./.complete -c . \
  | docker import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
echo "setup-docker: base image $BASE_IMAGE ready"
