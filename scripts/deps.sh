#!/usr/bin/env bash
# Installs the Debian packages kvlab needs (only those missing).
set -euo pipefail
pkgs=(cmake make gcc pkg-config libncurses-dev liblua5.4-dev libcjson-dev libxxhash-dev
      uthash-dev libcmocka-dev libyaml-dev tmux clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "kvlab: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
