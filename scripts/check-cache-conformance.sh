#!/usr/bin/env bash
# The cache conformance run (issue 12): the public cache-tests corpus, in its private-cache
# (browser) mode, through `tern --cache DIR` (Tests/Conformance/cache-tests/run.mjs). Writes
# Tests/Conformance/cache-tests/results/tern.json and RESULTS.md (Tern next to Chrome, Firefox
# and Safari). Fails when a test that checks a response must not be reused fails, or when the
# run cannot be done; other failures are reported in RESULTS.md, not fatal.
# The corpus is vendored at Tests/Conformance/cache-tests/corpus (BSD-3-Clause, VENDORED.md
# there); CACHE_TESTS_DIR points elsewhere, e.g. at a newer upstream copy.
# Usage: scripts/check-cache-conformance.sh [--id TEST_ID]   (one test, with its exchanges)
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
export CACHE_TESTS_DIR=${CACHE_TESTS_DIR:-$ROOT/Tests/Conformance/cache-tests/corpus}
if [ ! -f "$CACHE_TESTS_DIR/tests/index.mjs" ]; then
  echo "check-cache-conformance: the cache-tests corpus is not at $CACHE_TESTS_DIR (set CACHE_TESTS_DIR)"
  exit 1
fi
command -v node >/dev/null || { echo "check-cache-conformance: node not found (scripts/setup.sh installs nodejs)"; exit 1; }
# TERN: a tern binary already built (scripts/test.sh passes the debug one); otherwise build it.
if [ -z "${TERN:-}" ]; then
  swift build --product tern 2>&1 | tail -n 1
  TERN=$ROOT/.build/debug/tern
fi
export TERN
# The corpus's server logs a "SERVER WARNING" for each request it has no answer for (a test
# whose cache sent more requests than the test has): kept in build/, counted here. "State not
# found" only means no request of a test reached the server (all answered by the cache).
mkdir -p build
set +e
node Tests/Conformance/cache-tests/run.mjs "$@" >build/cache-tests.log 2>&1
rc=$?
set -e
grep -v '^SERVER WARNING' build/cache-tests.log || true
warnings=$(grep '^SERVER WARNING' build/cache-tests.log | grep -vc 'State not found' || true)
[ "$warnings" = 0 ] || echo "check-cache-conformance: $warnings server warnings (build/cache-tests.log)"
exit $rc
