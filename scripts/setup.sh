#!/usr/bin/env bash
# Installs what Tern needs on a fresh Debian 12 machine (run as root, or with sudo available).
# Swift itself (for the Swift layer) is expected at /opt/swift or on PATH.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config clang-format libuv1-dev libssl-dev zlib1g-dev libnghttp2-dev nghttp2-server nghttp2-client libbrotli-dev libzstd-dev nginx-light python3 python3-venv python3-dev valgrind curl time apache2 lighttpd squid"
# bench/: wrk (the ceiling), libcurl's multi interface, Node's http-parser (parser micro-benchmark)
# and gnuplot (the chart in bench/RESULTS.png). The Python clients' table needs python3-venv and
# python3-dev (above) and libcurl4-openssl-dev (pycurl compiles against it); bench/run installs
# the pinned PyPI packages into bench/.venv-python itself on first use.
PKGS="$PKGS wrk libcurl4-openssl-dev libhttp-parser-dev gnuplot-nox"
# The cache conformance run (scripts/check-cache-conformance.sh): the cache-tests corpus's
# server and client are Node.js modules (no npm packages). Debian's nodejs (18) or a newer one.
PKGS="$PKGS nodejs"
# tern-pac, the proxy auto-config evaluator (docs/pac.md), runs scripts with duktape.
PKGS="$PKGS duktape-dev"
# The SOCKS tests' proxy (Dante: SOCKS4, 4A and 5, with RFC 1929 user name and password).
PKGS="$PKGS dante-server"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
# libFuzzer: the Swift toolchain's clang ships it; otherwise take Debian's clang.
if ! [ -x /opt/swift/usr/bin/clang ]; then
  for p in clang-14 libclang-rt-14-dev libfuzzer-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
fi
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  # The tests start their own nginx, Apache, lighttpd and squid on free ports; the packages'
  # system services must not start (they would fight over port 80). policy-rc.d says so to
  # every package's install script, for the time of the install only.
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
  if [ "$added_policy" = 1 ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
fi
# Dante checks SOCKS5 user names and passwords against the system's users: the SOCKS tests'
# user (no home, no shell, no login) with the password Tests/TestServer/servers.py gives them.
if ! id ternsocks >/dev/null 2>&1; then
  $SUDO useradd --system --no-create-home --shell /usr/sbin/nologin ternsocks
  echo 'ternsocks:socks-wonderland' | $SUDO chpasswd
fi
# The Python package's build and test environment (build/python-venv: cffi, setuptools, pytest).
"$(dirname "$0")/python-venv.sh" >/dev/null
echo "setup: ok"
