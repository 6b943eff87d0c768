#!/usr/bin/env bash
# Writes linker/order.txt: the functions that the release `tern` CLI and the tern-swift benchmark
# driver run in their common work, for lld's --symbol-ordering-file (linker/README.md). lld then
# places them next to each other at the start of .text, so that the pages the kernel maps around
# each first touch (64 KiB at a time) hold code that runs instead of its cold neighbours.
#
# The list is what valgrind's callgrind saw executed (every function run at least once, however
# cold) in runs against the test servers: first the union of the two workloads whose memory
# issue 19 sets goals for (`tern -s -o /dev/null` of 100 MiB, tern-swift get at 64 connections),
# then what other common runs add: tern -o FILE, over https (HTTP/1.1 and h2), --compressed;
# tern-swift get at 1 connection and over https, download. Each part is sorted by name.
# A stale list only costs memory: names that no longer exist are ignored, new functions land
# after the ordered ones. Run it again after large changes to the Swift code or a new toolchain.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
command -v valgrind >/dev/null || { echo "make-link-order: valgrind is needed (apt-get install valgrind)"; exit 1; }
swift build -c release --static-swift-stdlib --product tern >/dev/null
tern="$(swift build -c release --static-swift-stdlib --show-bin-path)/tern"
(cd bench && swift build -c release --static-swift-stdlib --scratch-path .build-static --product tern-swift >/dev/null)
driver="$ROOT/bench/.build-static/x86_64-unknown-linux-gnu/release/tern-swift"

work=$(mktemp -d)
chmod 755 "$work" # the test servers read below it
state="$work/state"
trap 'python3 Tests/TestServer/servers.py stop "$state" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
python3 Tests/TestServer/servers.py start "$state" >/dev/null
source <(grep -E '^(NGINX_PORT|FAULT_PORT|TLS_PORT|H2_TLS_PORT|CA_PEM)=' "$state/env")

# valgrind cannot read the DWARF of these binaries: it runs copies without debug sections, whose
# symbol names are the same.
strip --strip-debug -o "$work/tern" "$tern"
strip --strip-debug -o "$work/tern-swift" "$driver"
n=0
run() { # PART BINARY ARGS...: one callgrind run, its output in $work/cg.PART.N
  local part=$1
  shift
  n=$((n + 1))
  valgrind -q --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.$part.$n" "$@" >/dev/null
}
nginx="http://127.0.0.1:$NGINX_PORT"
run 1 "$work/tern" -s -o /dev/null "$nginx/100m.bin"
run 1 "$work/tern-swift" get "$nginx/1k.bin" 2000 64
run 2 "$work/tern" -s -o "$work/out.bin" "$nginx/1k.bin"
run 2 "$work/tern" -s --cacert "$CA_PEM" "https://localhost:$TLS_PORT/1k.bin"
run 2 "$work/tern" -s --http2 --cacert "$CA_PEM" "https://localhost:$H2_TLS_PORT/1k.bin"
run 2 "$work/tern" -s --compressed "http://127.0.0.1:$FAULT_PORT/gzip?kind=gzip&size=100000"
run 2 "$work/tern-swift" get "$nginx/1k.bin" 500 1
BENCH_CAFILE="$CA_PEM" run 2 "$work/tern-swift" get "https://localhost:$TLS_PORT/1k.bin" 500 8
run 2 "$work/tern-swift" download "$nginx/100m.bin" /dev/null

# Every function callgrind names in the two binaries' objects (fn= and cfn= entries; an object
# and a function are named once, then referred to by number).
python3 - "$work" "$work/tern" "$work/tern-swift" > linker/order.txt <<'EOF'
import glob, re, sys
work, objects = sys.argv[1], set(sys.argv[2:])
def executed(path):
    names = set()
    obs, fns, ob, cob = {}, {}, None, None
    for line in open(path, errors="replace"):
        m = re.match(r"^(ob|cob|fn|cfn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not m:
            continue
        kind, key, name = m.groups()
        if kind in ("ob", "cob"):
            if name:
                obs[key] = name
            ob, cob = (obs[key], None) if kind == "ob" else (ob, obs[key])
            continue
        owner = ob if kind == "fn" else (cob or ob)
        if kind == "cfn":
            cob = None
        if name and key not in fns:
            fns[key] = name
            if owner in objects and not name.startswith("0x") and " " not in name and "(" not in name:
                names.add(re.sub(r"'\d+$", "", name))  # callgrind marks recursion levels
    return names
first = set().union(*(executed(p) for p in glob.glob(work + "/cg.1.*")))
more = set().union(*(executed(p) for p in glob.glob(work + "/cg.2.*"))) - first
for name in sorted(first) + sorted(more):
    print(name)
EOF
# SwiftPM does not know that the links read the list: remove the two binaries, so that the next
# builds link them again with it.
rm -f "$tern" "$driver"
echo "make-link-order: $(wc -l < linker/order.txt) functions in linker/order.txt"
