#!/usr/bin/env bash
# Checks libtern as a C user gets it: installed with its pkg-config file, examples/fetch.c built
# against it alone, only tern_* exported, then real downloads from nginx: byte-identical,
# killed and resumed byte-identical, leak-free under valgrind, and flat memory (peak RSS of a
# 100 MiB and a 1 GiB download within 1 MiB of each other).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
cmake -S . -B build/release -DTERN_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS" >/dev/null
work=$(mktemp -d)
chmod 755 "$work" # the test servers (Apache as www-data, squid as proxy) read below it
state="$work/state"
cleanup() { python3 Tests/TestServer/servers.py stop "$state" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

cmake --install build/release --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -n1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export LD_LIBRARY_PATH="$libdir"
cc -std=c11 -Wall -Wextra -Werror examples/fetch.c $(pkg-config --cflags --libs tern) -lpthread -o "$work/fetch"
echo "fetch built with: $(pkg-config --cflags --libs tern)"

leaked=$(nm -D --defined-only "$libdir/libtern.so" | awk '{print $3}' | grep -v '^tern_' | grep -v '^TERN_0$' || true)
[ -z "$leaked" ] || { echo "FAIL: libtern.so exports non-tern symbols: $leaked"; exit 1; }
echo "exports: $(nm -D --defined-only "$libdir/libtern.so" | grep -c ' T tern_') tern_* functions, nothing else"

python3 Tests/TestServer/servers.py start "$state" >/dev/null
python3 Tests/TestServer/servers.py big "$state" >/dev/null
source <(grep -E '^(NGINX_PORT|SHA_100M|WWW)=' "$state/env")
base="http://127.0.0.1:$NGINX_PORT"
sha() { sha256sum "$1" | cut -d' ' -f1; }

"$work/fetch" "$base/100m.bin" "$work/a.bin"
[ "$(sha "$work/a.bin")" = "$SHA_100M" ] || { echo "FAIL: 100 MiB download differs"; exit 1; }
echo "100 MiB download: byte-identical"

# Killed mid-transfer (the body lands in b.bin.part until complete), then resumed.
part=0
for delay in 0.05 0.1 0.02 0.15 0.01 0.2; do
  rm -f "$work/b.bin" "$work/b.bin.part"
  "$work/fetch" "$base/100m.bin" "$work/b.bin" --resume 2>/dev/null & pid=$!
  sleep "$delay"; kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  part=$(stat -c %s "$work/b.bin.part" 2>/dev/null || echo 0)
  [ "$part" -gt 0 ] && [ "$part" -lt $((100 << 20)) ] && [ ! -e "$work/b.bin" ] && break
  part=0
done
[ "$part" -gt 0 ] || { echo "FAIL: could not interrupt a download mid-transfer"; exit 1; }
"$work/fetch" "$base/100m.bin" "$work/b.bin" --resume
[ "$(sha "$work/b.bin")" = "$SHA_100M" ] || { echo "FAIL: resumed download differs"; exit 1; }
[ ! -e "$work/b.bin.part" ] || { echo "FAIL: b.bin.part left behind"; exit 1; }
echo "killed at $part bytes, resumed: byte-identical"

valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
  --error-exitcode=9 "$work/fetch" "$base/1k.bin" "$work/c.bin" 2>"$work/vg.txt" \
  || { cat "$work/vg.txt"; echo "FAIL: valgrind"; exit 1; }
echo "valgrind: no leaks, no errors"

rss() { /usr/bin/time -f %M "$work/fetch" "$base/$1" "$work/rss.bin" 2>&1 >/dev/null | tail -n1; }
r100=$(rss 100m.bin); r1g=$(rss 1g.bin)
diff=$((r1g > r100 ? r1g - r100 : r100 - r1g))
echo "peak RSS: 100 MiB download ${r100} KiB, 1 GiB download ${r1g} KiB (difference ${diff} KiB)"
[ "$diff" -lt 1024 ] || { echo "FAIL: memory grows with body size"; exit 1; }
echo "check-install: ok"
