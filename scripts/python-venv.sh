#!/usr/bin/env bash
# Makes build/python-venv (idempotent): a virtual environment with what the Python package needs
# to build and be tested (cffi, setuptools, wheel, pytest), pyspnego for the NTLM test server
# (Tests/TestServer/ntlmserver.py) and h2 for the HTTP/2 fault server
# (Tests/TestServer/h2faultserver.py), so the system's Python stays clean.
# Run by scripts/setup.sh and scripts/check-python.sh. Prints the venv's python path.
set -euo pipefail
source "$(dirname "$0")/common.sh"
VENV="$ROOT/build/python-venv"
py="$VENV/bin/python"
if [ ! -x "$py" ]; then
  mkdir -p "$ROOT/build"
  python3 -m venv "$VENV" >&2 || {
    echo "python-venv: 'python3 -m venv' failed: install python3-venv (scripts/setup.sh does)" >&2
    exit 1
  }
fi
if ! "$py" -c 'import cffi, setuptools, wheel, pytest' 2>/dev/null; then
  echo "python-venv: installing cffi, setuptools, wheel, pytest into $VENV" >&2
  "$py" -m pip install -q --disable-pip-version-check \
    'cffi>=1.15' 'setuptools>=61' wheel 'pytest>=7' >&2 || {
    echo "python-venv: pip could not install cffi/setuptools/wheel/pytest" >&2
    exit 1
  }
fi
if ! "$py" -c 'import spnego' 2>/dev/null; then
  echo "python-venv: installing pyspnego (the NTLM test server's acceptor) into $VENV" >&2
  "$py" -m pip install -q --disable-pip-version-check 'pyspnego>=0.10' >&2 || {
    echo "python-venv: pip could not install pyspnego" >&2
    exit 1
  }
fi
if ! "$py" -c 'import h2.connection, h2.config' 2>/dev/null; then
  echo "python-venv: installing h2 (the HTTP/2 fault server's framing) into $VENV" >&2
  "$py" -m pip install -q --disable-pip-version-check 'h2>=4.1,<5' >&2 || {
    echo "python-venv: pip could not install h2" >&2
    exit 1
  }
fi
# Python.h: the cffi extension compiles against it (python3-dev on Debian).
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$inc/Python.h" ] || {
  echo "python-venv: $inc/Python.h is missing: install python3-dev (scripts/setup.sh does)" >&2
  exit 1
}
echo "$py"
