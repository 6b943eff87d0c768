#!/usr/bin/env bash
# Applies .clang-format to every C file of the project, or with --check lists the files that
# differ from it and fails (scripts/test.sh runs the check).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in $files; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "not formatted: $f (run scripts/format.sh)"
      bad=1
    fi
  done
  [ "$bad" = 0 ] && echo "format: $(echo "$files" | wc -l) C files follow .clang-format"
  exit "$bad"
fi
clang-format -i $files
