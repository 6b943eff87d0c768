#!/usr/bin/env bash
# The newcomer's path, on a clean copy of the committed tree (git archive HEAD into a temporary
# directory, so nothing built here helps): scripts/install.sh into a temporary prefix; then
# examples/get.c built with `pkg-config --cflags --libs tern` against that prefix runs a GET
# against a local server without LD_LIBRARY_PATH; the man page renders; `tern -V` prints its
# version and what it supports; the shell completions are there; `pip install ./python` into a
# fresh virtual environment with no PKG_CONFIG_PATH runs a GET; and no tracked file speaks of
# development sessions. One OK or FAIL line per step, the time each took, and a non-zero exit
# when any step failed. The first Swift release build makes it take a few minutes.
# Environment: JOBS (parallel build jobs, passed to install.sh), KEEP=1 keeps the directory.
set -uo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"

work=$(mktemp -d "${TMPDIR:-/tmp}/tern-newcomer.XXXXXX")
tree="$work/tree"
prefix="$work/prefix"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "check-newcomer: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

failed=0
step_start=$SECONDS
ok() { echo "OK   $1 ($((SECONDS - step_start)) s)"; step_start=$SECONDS; }
fail() {
  echo "FAIL $1 ($((SECONDS - step_start)) s)"
  [ -n "${2:-}" ] && [ -s "$2" ] && sed 's/^/     | /' "$2" | tail -n 30
  failed=$((failed + 1))
  step_start=$SECONDS
}

[ -z "$(git status --porcelain --untracked-files=no)" ] ||
  echo "NOTE uncommitted changes are not part of this check: it takes the tree at HEAD"
mkdir -p "$tree"
if git archive HEAD | tar -x -C "$tree"; then
  ok "clean copy of HEAD ($(git rev-parse --short HEAD)) in $tree"
else
  fail "git archive HEAD"
  exit 1
fi

# ---- no tracked file speaks of development sessions ----
word=session # the pattern is built here so that this file does not match it
if grep -rniE "$word [0-9]|this $word" "$tree" >"$work/grep.txt"; then
  fail "tracked files mention development sessions ($(wc -l <"$work/grep.txt") lines)" "$work/grep.txt"
else
  ok "no tracked file mentions development sessions"
fi

# ---- install.sh ----
if JOBS=$JOBS "$tree/scripts/install.sh" "$prefix" >"$work/install.txt" 2>&1; then
  ok "scripts/install.sh $prefix"
else
  fail "scripts/install.sh $prefix" "$work/install.txt"
  exit 1
fi
grep -q 'NOTE: Swift was not found' "$work/install.txt" &&
  fail "install.sh found no Swift: the CLI steps below cannot pass" "$work/install.txt"
libdir=$(ls -d "$prefix"/lib*/pkgconfig 2>/dev/null | head -n1)
libdir=${libdir%/pkgconfig}

# ---- a local server: python3 -m http.server on a free port ----
mkdir -p "$work/www"
head -c 100000 /dev/urandom >"$work/www/blob.bin"
python3 -u -m http.server --bind 127.0.0.1 --directory "$work/www" 0 >"$work/server.txt" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$work/server.txt" | head -n1)
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -n "$port" ]; then
  url="http://127.0.0.1:$port/blob.bin"
  ok "local server: $url"
else
  fail "python3 -m http.server did not start" "$work/server.txt"
  exit 1
fi

# ---- a C program built with pkg-config, started without LD_LIBRARY_PATH ----
cflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs tern 2>"$work/cc.txt")
if cc -std=c11 -Wall -Wextra -Werror "$tree/examples/get.c" $cflags -o "$work/get" \
  2>>"$work/cc.txt"; then
  ok "examples/get.c built with: cc get.c $cflags"
else
  fail "examples/get.c does not build against the prefix" "$work/cc.txt"
fi
if [ -x "$work/get" ] &&
  env -u LD_LIBRARY_PATH "$work/get" "$url" >"$work/get.out" 2>"$work/get.err" &&
  cmp -s "$work/get.out" "$work/www/blob.bin" && grep -q '^HTTP 200 ' "$work/get.err"; then
  ok "get $url: $(cat "$work/get.err"), body byte-identical, no LD_LIBRARY_PATH"
else
  fail "get $url (without LD_LIBRARY_PATH)" "$work/get.err"
fi

# ---- the man page ----
man_page="$prefix/share/man/man1/tern.1"
if ! command -v man >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq man-db >/dev/null 2>&1
fi
if [ ! -f "$man_page" ]; then
  fail "no man page at $man_page"
elif MANPAGER=cat MANWIDTH=80 man --warnings -l "$man_page" >"$work/man.txt" 2>"$work/man.err" &&
  grep -q '^NAME' "$work/man.txt" && ! grep -qi 'warning' "$work/man.err"; then
  ok "man -l $man_page renders ($(wc -l <"$work/man.txt") lines, no warnings): $(sed -n '/^NAME/{n;p;q}' "$work/man.txt" | sed 's/^ *//')"
else
  cat "$work/man.err" "$work/man.txt" >"$work/man.both" 2>/dev/null
  fail "man -l $man_page does not render cleanly" "$work/man.both"
fi

# ---- tern -V ----
if "$prefix/bin/tern" -V >"$work/V.txt" 2>&1 && grep -qE '^tern [0-9]+\.[0-9]+' "$work/V.txt" &&
  grep -qE '^(Features|Protocols):' "$work/V.txt"; then
  ok "tern -V: $(head -n1 "$work/V.txt")"
else
  fail "tern -V prints no version line and Features/Protocols line" "$work/V.txt"
fi

# ---- shell completions ----
missing=""
for f in share/bash-completion/completions/tern share/zsh/site-functions/_tern \
  share/fish/vendor_completions.d/tern.fish; do
  [ -s "$prefix/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then
  ok "bash, zsh and fish completions installed"
else
  fail "completions missing or empty:$missing"
fi

# ---- Python: pip install ./python with no PKG_CONFIG_PATH ----
if python3 -m venv "$work/venv" >"$work/pip.txt" 2>&1 &&
  env -u PKG_CONFIG_PATH "$work/venv/bin/pip" install -q "$tree/python" >>"$work/pip.txt" 2>&1; then
  ok "pip install ./python into a fresh venv, no PKG_CONFIG_PATH"
  if env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH "$work/venv/bin/python" -c '
import sys, tern
r = tern.get(sys.argv[1])
assert r.status_code == 200, r.status_code
assert r.content == open(sys.argv[2], "rb").read(), "body differs"
print(len(r.content))' "$url" "$work/www/blob.bin" >"$work/py.txt" 2>&1; then
    ok "python: tern.get($url): 200, $(cat "$work/py.txt") bytes, byte-identical"
  else
    fail "python: tern.get($url)" "$work/py.txt"
  fi
else
  fail "pip install ./python (no PKG_CONFIG_PATH)" "$work/pip.txt"
fi

echo "check-newcomer: $failed step(s) failed, ${SECONDS} s in all"
[ "$failed" -eq 0 ] && echo "check-newcomer: ok"
exit $((failed > 0))
