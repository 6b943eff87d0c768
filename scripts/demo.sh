#!/usr/bin/env bash
# The main job: real transfers from a local nginx (started here, stopped on exit), checked
# byte for byte. Uses the `tern` CLI when the Swift toolchain is present, and the C example
# (examples/fetch.c) as well.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
state=$(mktemp -d)
trap 'python3 Tests/TestServer/servers.py stop "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
python3 Tests/TestServer/servers.py start "$state" >/dev/null
source <(grep -E '^(NGINX_PORT|TLS_PORT|CA_PEM|SHA_100M)=' "$state/env")
url="http://127.0.0.1:$NGINX_PORT/100m.bin"
out="$state/out.bin"

cmake -S . -B build/release -DTERN_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS" --target fetch >/dev/null
echo "\$ fetch $url out.bin"
build/release/fetch "$url" "$out"
[ "$(sha256sum "$out" | cut -d' ' -f1)" = "$SHA_100M" ] && echo "byte-identical (sha256 $SHA_100M)"

if command -v swift >/dev/null && [ -d Sources/tern ]; then
  swift build -c release --product tern >/dev/null
  tern=$(swift build -c release --show-bin-path)/tern
  rm -f "$out"
  echo "\$ tern -o out.bin -w '%{http_code} %{size_download} %{time_total}\\n' $url"
  "$tern" -s -o "$out" -w '%{http_code} %{size_download} %{time_total}\n' "$url"
  [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$SHA_100M" ] && echo "byte-identical"
  if [ -n "${TLS_PORT:-}" ]; then
    rm -f "$out"
    echo "\$ tern --cacert ca.pem -o out.bin https://localhost:$TLS_PORT/100m.bin"
    "$tern" -s --cacert "$CA_PEM" -o "$out" -w '%{http_code} %{size_download} %{time_total}\n' \
      "https://localhost:$TLS_PORT/100m.bin"
    [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$SHA_100M" ] && echo "byte-identical over TLS"
  fi
fi
