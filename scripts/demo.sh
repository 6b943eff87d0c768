#!/usr/bin/env bash
# The main job: real transfers from a local nginx (started here, stopped on exit), checked byte
# for byte: the `tern` CLI over HTTP and HTTPS, killed and resumed, and the C example.
set -euo pipefail
source "$(dirname "$0")/common.sh"
# Installs what is missing first (idempotent, quick when nothing is), so this one command is all
# a fresh machine needs.
bash "$(dirname "$0")/setup.sh"
cd "$ROOT"
state=$(mktemp -d)
chmod 755 "$state" # the test servers (Apache as www-data, squid as proxy) read below it
# By absolute path: the demo works inside $state, where a relative one would not be found and
# the servers would outlive the demo.
trap 'python3 "$ROOT/Tests/TestServer/servers.py" stop "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
python3 Tests/TestServer/servers.py start "$state" >/dev/null
source <(grep -E '^(NGINX_PORT|TLS_PORT|CA_PEM|SHA_100M)=' "$state/env")
cd "$state"
same() { [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA_100M" ] && echo "  -> $1 is byte-identical (sha256 ${SHA_100M:0:16}...)"; }

echo "building the tern CLI (swift build -c release --static-swift-stdlib)..."
(cd "$ROOT" && swift build -c release --static-swift-stdlib --product tern >/dev/null)
PATH="$(cd "$ROOT" && swift build -c release --static-swift-stdlib --show-bin-path):$PATH"
url="http://127.0.0.1:$NGINX_PORT/100m.bin"
tls="https://localhost:$TLS_PORT"
set -x
# README: begin
tern -s -o out.bin -w '%{http_code} %{size_download} bytes in %{time_total} s\n' "$url"
tern -s --cacert "$CA_PEM" -o tls.bin "$tls/100m.bin"
tern -s --cacert "$CA_PEM" -o cut.bin "$tls/slow/100m.bin" & sleep 1; kill -9 $!  # cut...
tern -s --cacert "$CA_PEM" -C - -o cut.bin "$tls/100m.bin"                      # ...resumed
# README: end
{ set +x; } 2>/dev/null
same out.bin && same tls.bin && same cut.bin

echo "the C example, built against the library (examples/fetch.c):"
(cd "$ROOT" && cmake -S . -B build/release -DTERN_WERROR=ON >/dev/null && cmake --build build/release -j"$JOBS" --target fetch >/dev/null)
"$ROOT/build/release/fetch" "$url" fetch.bin && same fetch.bin
