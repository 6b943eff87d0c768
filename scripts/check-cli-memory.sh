#!/usr/bin/env bash
# The tern CLI's memory does not grow with the size of what it moves (issues 3 and 5), measured
# as peak RSS (/usr/bin/time -f %M) of a release build with the Swift runtime linked statically
# (a dynamically linked Swift runtime maps ~25 MiB of code pages before any transfer):
#   - `tern -s -o /dev/null` of 1 GiB is within 1 MiB of the same for 100 MiB, and under 11 MiB
#     (issue 19's goal, libcurl's curl-multi driver; linker/README.md says how the CLI is linked);
#   - a 200 MiB multipart upload streamed from disk stays under 20 MiB and arrives byte-identical;
#   - a 100 MiB gzip-encoded response (--compressed) decodes byte-identical with the same flat
#     memory, and a 1 GiB-inflating bomb is refused with a clear error.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
swift build -c release --static-swift-stdlib --product tern >/dev/null
tern="$(swift build -c release --static-swift-stdlib --show-bin-path)/tern"
work=$(mktemp -d)
chmod 755 "$work" # the test servers (Apache as www-data, squid as proxy) read below it
state="$work/state"
trap 'python3 Tests/TestServer/servers.py stop "$state" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
python3 Tests/TestServer/servers.py start "$state" >/dev/null
python3 Tests/TestServer/servers.py big "$state" >/dev/null
source <(grep -E '^(NGINX_PORT|FAULT_PORT|SHA_100M|WWW)=' "$state/env")
rss() { /usr/bin/time -f %M -o "$work/rss" "$@" >/dev/null; cat "$work/rss"; }
fail() { echo "FAIL: $*"; exit 1; }

r100=$(rss "$tern" -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/100m.bin")
r1g=$(rss "$tern" -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/1g.bin")
d=$((r1g > r100 ? r1g - r100 : r100 - r1g))
echo "tern -o /dev/null: 100 MiB ${r100} KiB, 1 GiB ${r1g} KiB peak RSS (difference ${d} KiB)"
[ "$d" -lt 1024 ] || fail "memory grows with the download size"
[ "$r1g" -le $((11 * 1024)) ] || fail "the 1 GiB download took ${r1g} KiB (> 11 MiB)"

cat "$WWW/100m.bin" "$WWW/100m.bin" > "$work/big200.bin"
want=$(sha256sum "$work/big200.bin" | cut -d' ' -f1)
ru=$(rss "$tern" -s -o "$work/report.json" -F title=hello -F "file=@$work/big200.bin;type=application/octet-stream" \
  "http://127.0.0.1:$FAULT_PORT/multipart")
grep -q "\"sha256\": \"$want\"" "$work/report.json" || fail "the 200 MiB part did not arrive intact: $(cat "$work/report.json")"
echo "tern -F file=@200MiB: arrived byte-identical, ${ru} KiB peak RSS"
[ "$ru" -lt $((20 * 1024)) ] || fail "a 200 MiB multipart upload took ${ru} KiB (>= 20 MiB)"

rg=$(rss "$tern" -s --compressed -o "$work/gz.bin" "http://127.0.0.1:$NGINX_PORT/gzip/100m.bin")
[ "$(sha256sum "$work/gz.bin" | cut -d' ' -f1)" = "$SHA_100M" ] || fail "gzip-decoded 100 MiB differs"
echo "tern --compressed (100 MiB gzip): decoded byte-identical, ${rg} KiB peak RSS"
[ $((rg > r100 ? rg - r100 : r100 - rg)) -lt 2048 ] || fail "decoding grows memory"

set +e
msg=$("$tern" -sS --compressed -o "$work/bomb.bin" "http://127.0.0.1:$FAULT_PORT/gzip?size=1073741824&zeros=1" 2>&1)
rc=$?
set -e
[ "$rc" -ne 0 ] && [ ! -e "$work/bomb.bin" ] || fail "the bomb was not refused (exit $rc)"
echo "gzip bomb (1 GiB of zeros): refused, exit $rc: $msg"
echo "check-cli-memory: ok"
