#!/usr/bin/env bash
# Checks libtern as a C user gets it: installed with its pkg-config file and CMake package,
# examples/fetch.c and examples/get.c built against it alone and started without
# LD_LIBRARY_PATH (tern.pc gives the run path), only tern_* exported, then real downloads from
# nginx: byte-identical, killed and resumed byte-identical, leak-free under valgrind, and flat
# memory (peak RSS of a 100 MiB and a 1 GiB download within 1 MiB of each other).
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
# The programs must find libtern.so through the run path tern.pc's Libs put in them.
unset LD_LIBRARY_PATH
cc -std=c11 -Wall -Wextra -Werror examples/fetch.c $(pkg-config --cflags --libs tern) -lpthread -o "$work/fetch"
cc -std=c11 -Wall -Wextra -Werror examples/get.c $(pkg-config --cflags --libs tern) -o "$work/get"
echo "fetch and get built with: $(pkg-config --cflags --libs tern)"
found=$(ldd "$work/get" | awk '$1 ~ /^libtern\.so/ {print $3}')
[ "$(realpath "$found")" = "$(realpath "$libdir"/libtern.so.*.*.*)" ] \
  || { echo "FAIL: get loads libtern from '$found', not from $libdir"; exit 1; }
echo "run path: get loads $found without LD_LIBRARY_PATH"

leaked=$(nm -D --defined-only "$libdir/libtern.so" | awk '{print $3}' | grep -v '^tern_' | grep -v '^TERN_0$' || true)
[ -z "$leaked" ] || { echo "FAIL: libtern.so exports non-tern symbols: $leaked"; exit 1; }
echo "exports: $(nm -D --defined-only "$libdir/libtern.so" | grep -c ' T tern_') tern_* functions, nothing else"

python3 Tests/TestServer/servers.py start "$state" >/dev/null
python3 Tests/TestServer/servers.py big "$state" >/dev/null
source <(grep -E '^(NGINX_PORT|SHA_100M|WWW)=' "$state/env")
base="http://127.0.0.1:$NGINX_PORT"
sha() { sha256sum "$1" | cut -d' ' -f1; }

"$work/get" "$base/1k.bin" >"$work/get.out" 2>"$work/get.err"
[ "$(sha "$work/get.out")" = "$(sha "$WWW/1k.bin")" ] || { echo "FAIL: get's body differs"; exit 1; }
grep -q '^HTTP 200 OK, 1024 bytes$' "$work/get.err" || { cat "$work/get.err"; echo "FAIL: get's status line"; exit 1; }
echo "get: HTTP 200, body byte-identical"

# The CMake package: find_package(tern) gives tern::tern and tern::tern_static.
mkdir -p "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(tern $(pkg-config --modversion tern) EXACT REQUIRED)
add_executable(get_shared "$ROOT/examples/get.c")
target_link_libraries(get_shared PRIVATE tern::tern)
add_executable(get_static "$ROOT/examples/get.c")
target_link_libraries(get_static PRIVATE tern::tern_static)
EOF
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
for v in shared static; do
  "$work/consumer/build/get_$v" "$base/1k.bin" 2>/dev/null | cmp -s - "$WWW/1k.bin" \
    || { echo "FAIL: get built with find_package(tern), tern::tern_$v"; exit 1; }
done
echo "CMake package: get linked with tern::tern and tern::tern_static, bodies byte-identical"

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
