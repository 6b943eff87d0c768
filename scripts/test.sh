#!/usr/bin/env bash
# The whole test suite: warnings-as-errors build + ctest, the same under ASan+UBSan (with
# LeakSanitizer) and under TSan, valgrind on the example, a bounded fuzz run, the installed library used
# through pkg-config, and the Swift package build.
# Usage: scripts/test.sh [--quick]   (--quick: the plain ctest run only)
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
step() { printf '\n== %s\n' "$*"; }

step "build (gcc, -Wall -Wextra -Werror) and ctest"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS"
(cd build/release && ctest -j"$JOBS" --output-on-failure)
[ "$QUICK" = 1 ] && exit 0

step "ASan + UBSan + LeakSanitizer (clang) and ctest"
cmake -S . -B build/asan -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_BUILD_TYPE=Debug \
  -DTERN_ASAN=ON -DTERN_WERROR=ON >/dev/null
cmake --build build/asan -j"$JOBS"
(cd build/asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest -j"$JOBS" --output-on-failure)

step "ThreadSanitizer (gcc; Swift's clang runtime wants libdispatch) and ctest"
cmake -S . -B build/tsan -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DTERN_TSAN=ON >/dev/null
cmake --build build/tsan -j"$JOBS"
(cd build/tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j"$JOBS" --output-on-failure -E '^parse\.')

step "fuzz the response parser for ${FUZZ_SECONDS}s"
cmake -S . -B build/fuzz -DCMAKE_C_COMPILER="$CLANG" -DTERN_FUZZ=ON -DTERN_BUILD_TESTS=OFF \
  -DTERN_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build/fuzz -j"$JOBS" --target fuzz_http1_parse
corpus=$(mktemp -d)
cp Tests/Fuzz/corpus/http1_parse/* "$corpus"/
build/fuzz/fuzz_http1_parse -max_total_time="$FUZZ_SECONDS" -dict=Tests/Fuzz/http.dict \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
rm -rf "$corpus"

step "install, build examples/fetch.c through pkg-config, valgrind, resume, flat memory"
scripts/check-install.sh

step "Swift package builds"
swift build 2>&1 | tail -n 3

echo
echo "scripts/test.sh: all steps passed"
