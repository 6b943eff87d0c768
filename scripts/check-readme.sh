#!/usr/bin/env bash
# The README's examples are copies of code that CI runs: each region between "README: begin" and
# "README: end" in these files must appear verbatim (dedented) in README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for src in examples/fetch.c Tests/TernTests/ReadmeExampleTests.swift scripts/demo.sh; do
  python3 - "$src" <<'PY' || status=1
import re, sys, textwrap
src = sys.argv[1]
text = open(src).read()
m = re.search(r"README: begin[^\n]*\n(.*?)\n[^\n]*README: end", text, re.S)
if not m:
    sys.exit(f"check-readme: {src} has no README region")
region = textwrap.dedent(m.group(1)).strip("\n")
if region not in open("README.md").read():
    sys.exit(f"check-readme: README.md does not hold the current example from {src}:\n{region}")
print(f"check-readme: {src}: in README.md")
PY
done
exit $status
