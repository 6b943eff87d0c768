#!/usr/bin/env bash
# Installs what Tern needs on a fresh Debian 12 machine (run as root, or with sudo available).
# Swift itself (for the Swift layer) is expected at /opt/swift or on PATH.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config libuv1-dev libssl-dev zlib1g-dev nginx-light python3 valgrind curl time apache2 lighttpd squid"
# bench/: wrk (the ceiling), libcurl's multi interface, Node's http-parser (parser micro-benchmark)
# and gnuplot (the chart in bench/RESULTS.png).
PKGS="$PKGS wrk libcurl4-openssl-dev libhttp-parser-dev gnuplot-nox"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
# libFuzzer: the Swift toolchain's clang ships it; otherwise take Debian's clang.
if ! [ -x /opt/swift/usr/bin/clang ]; then
  for p in clang-14 libclang-rt-14-dev libfuzzer-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
fi
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
echo "setup: ok"
