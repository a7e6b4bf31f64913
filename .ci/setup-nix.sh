#!/usr/bin/env bash
# Install nix (Debian's nix-bin, 2.8) and configure it for this kind of
# machine: root, single-user (no nix-daemon: root writes /nix/store itself),
# no Nix sandbox (unavailable in a container without user namespaces set up
# for nix), flakes enabled, and no binary cache (cache.nixos.org is not
# reachable here; builds happen locally). Idempotent.
#
# Non-root users would instead start `nix-daemon` (Debian ships a systemd unit
# `nix-daemon.socket`) and join the `nix-users` group.
set -euo pipefail

CONF=/etc/nix/nix.conf

if ! command -v nix >/dev/null; then
  echo "setup-nix: installing nix-bin"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nix-bin >/dev/null
fi

mkdir -p /etc/nix
touch "$CONF"
set_option() {  # set_option KEY VALUE: replace or append `KEY = VALUE`
  if grep -qE "^[[:space:]]*$1[[:space:]]*=" "$CONF"; then
    sed -i -E "s|^[[:space:]]*$1[[:space:]]*=.*|$1 = $2|" "$CONF"
  else
    echo "$1 = $2" >>"$CONF"
  fi
}
set_option experimental-features "nix-command flakes"
set_option sandbox false
set_option substituters ""
# Offline: do not try to refresh the flake registry from GitHub.
set_option flake-registry ""

out=$(nix eval --raw --expr 'if builtins ? getFlake then "flakes ok" else "no flakes"' 2>&1) || true
echo "setup-nix: $(nix --version | head -n1): $out"
[ "$out" = "flakes ok" ]
