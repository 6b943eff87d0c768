#!/usr/bin/env bash
# Every public declaration in tern.h says which thread may call it and since which version it
# exists (docs/c-api.md, "Threads and versions"): the doc comment (/** ... */) right above each
# TERN_API function, and above each callback typedef (typedef ... (*tern_..._cb)(...)), must hold
# a "Thread:" note and a "Since X.Y" note. Only #define lines may stand between the comment and
# the declaration. Exits 1 naming every declaration that lacks one.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "${1:-CSources/include/tern.h}" <<'PY'
import re, sys
path = sys.argv[1]
lines = open(path).read().split("\n")
decl = re.compile(r"^TERN_API\b[^(]*?\b(tern_\w+)\s*\(|^typedef\b[^(]*\(\s*\*\s*(tern_\w+)\s*\)")
bad = []
count = 0
for i, line in enumerate(lines):
    m = decl.match(line)
    if not m:
        continue
    name = m.group(1) or m.group(2)
    count += 1
    j = i - 1
    while j >= 0 and lines[j].startswith("#define"):
        j -= 1
    comment = ""
    if j >= 0 and lines[j].rstrip().endswith("*/"):
        k = j
        while k >= 0 and "/*" not in lines[k]:
            k -= 1
        if k >= 0 and lines[k].lstrip().startswith("/**"):
            comment = "\n".join(lines[k : j + 1])
    missing = []
    if not comment:
        missing.append("a doc comment")
    else:
        if "Thread:" not in comment:
            missing.append('a "Thread:" note')
        if not re.search(r"\bSince \d+\.\d+\b", comment):
            missing.append('a "Since X.Y" note')
    if missing:
        bad.append(f"{path}:{i + 1}: {name} lacks {' and '.join(missing)}")
for b in bad:
    print(f"check-header: {b}", file=sys.stderr)
if bad:
    sys.exit(1)
print(f"check-header: {count} declarations in {path} say their thread and version")
PY
