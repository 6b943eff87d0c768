#!/usr/bin/env bash
# The README's examples are copies of code that CI runs: each region between "README: begin" and
# "README: end" in these files (a file may hold several) must appear verbatim (dedented) in
# README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for src in examples/fetch.c examples/get.c Tests/TernTests/ReadmeExampleTests.swift scripts/demo.sh \
  examples/swift-everyday/Sources/first/main.swift \
  examples/swift-everyday/Sources/everyday/Everyday.swift python/tests/test_readme.py \
  examples/swift-everyday/Sources/filetransfer/main.swift \
  Tests/TernOpenAPITests/TernTransportTests.swift; do
  python3 - "$src" <<'PY' || status=1
import re, sys, textwrap
src = sys.argv[1]
text = open(src).read()
regions = re.findall(r"README: begin[^\n]*\n(.*?)\n[^\n]*README: end", text, re.S)
if not regions:
    sys.exit(f"check-readme: {src} has no README region")
readme = open("README.md").read()
missing = 0
for region in regions:
    region = textwrap.dedent(region).strip("\n")
    if region not in readme:
        print(f"check-readme: README.md does not hold the current example from {src}:\n{region}",
              file=sys.stderr)
        missing += 1
if missing:
    sys.exit(1)
print(f"check-readme: {src}: {len(regions)} region(s) in README.md")
PY
done
exit $status
