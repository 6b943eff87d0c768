#!/usr/bin/env bash
# The whole test suite: warnings-as-errors build + ctest, the same under ASan+UBSan (with
# LeakSanitizer), the allocation-failure torture run, ctest under TSan, a bounded fuzz run, the
# installed library used through pkg-config (valgrind, resume, flat memory), the Python package
# (pip install ./python, pytest against the same servers), the Swift build and
# tests (plain, then under TSan), the cache-tests conformance run (tern --cache), the Swift
# example package (examples/swift-everyday), the CLI's memory, the README's examples, the demo,
# and a smoke pass of the benchmark drivers.
# Usage: scripts/test.sh [--quick]   (--quick: the plain build and ctest only)
set -euo pipefail
source "$(dirname "$0")/common.sh"
# Installs what is missing first (idempotent, quick when nothing is), so this one command is all
# a fresh machine needs.
bash "$(dirname "$0")/setup.sh"
cd "$ROOT"
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
mkdir -p build
passed=0
failed=0
# Each step's header says how long the one before it took (and the run so far), so a CI log
# shows where its half hour goes.
step_started=$SECONDS
step_name=""
step_done() {
  [ -n "$step_name" ] && printf '\n-- %s: %d s (total %d s)\n' "$step_name" $((SECONDS - step_started)) "$SECONDS"
  step_started=$SECONDS
}
step() {
  step_done
  step_name=$*
  printf '\n== %s\n' "$*"
}
# Runs ctest in a build dir and adds its counts to the totals.
run_ctest() {
  local dir=$1; shift
  local log="build/ctest-$(basename "$dir").log"
  local rc=0
  (cd "$dir" && "$@" ctest -j"$JOBS" --output-on-failure) 2>&1 | tee "$log" | grep -vE '^ *(Start|[0-9]+/[0-9]+ Test)' || true
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n1) || rc=1
  local total fails
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  fails=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
  passed=$((passed + total - fails))
  failed=$((failed + fails))
  # A skip (exit 77, TEST_SKIP_EXIT) is shown and fails the run: CI's machine is expected to
  # meet every case's premise, so a skip there is a test that did not test.
  if grep -q '(Skipped)' "$log"; then
    grep '(Skipped)' "$log"
    echo "ctest in $dir skipped tests (above)"
    echo "$passed passed, 1 failed"
    exit 1
  fi
  [ "$rc" = 0 ] && [ "$fails" = 0 ] || { echo "ctest in $dir failed"; echo "$passed passed, $((failed > 0 ? failed : 1)) failed"; exit 1; }
}

# ctest also runs pac.protocol (Tests/PAC/test_pac.py: tern-pac driven through its protocol) when
# duktape is installed, so tern-pac is checked plain, under ASan+UBSan+LSan and under TSan.
step "build (gcc, -Wall -Wextra -Werror) and ctest"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS"
run_ctest build/release env
if [ "$QUICK" = 1 ]; then echo "$passed passed, $failed failed"; exit 0; fi

step "ASan + UBSan + LeakSanitizer (clang) and ctest"
cmake -S . -B build/asan -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_BUILD_TYPE=Debug \
  -DTERN_ASAN=ON -DTERN_WERROR=ON >/dev/null
cmake --build build/asan -j"$JOBS" 2>&1 | grep -v "Cannot export local symbol '__asan" || true
run_ctest build/asan env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

step "allocation-failure torture run: selected C cases with the N-th engine allocation failing, every N"
# ASan+LSan build with -DTERN_TORTURE (Tests/CTests/torture.c fails the N-th allocation); the
# driver runs ~30 cases (GET, chunked, redirects, Digest, .part downloads, uploads, gzip/br/zstd,
# TLS, pipelining, cancel, shutdown) at every N, a stride above 250 runs: a few minutes on 2
# cores. A case may fail its assertions; a crash, sanitizer report, lost reference or hang fails.
cmake -S . -B build/torture -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_BUILD_TYPE=Debug \
  -DTERN_ASAN=ON -DTERN_WERROR=ON -DTERN_TORTURE=ON -DTERN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/torture -j"$JOBS" --target test-http test-hops test-body test-tls test-faults \
  test-hostile test-ntlm test-http2 2>&1 | grep -v "Cannot export local symbol '__asan" || true
torture_rc=0
python3 Tests/CTests/torture.py --jobs "$JOBS" build/torture >build/torture.log 2>&1 || torture_rc=$?
grep -vE '^[a-z]+:[a-z0-9_]+ +A=' build/torture.log || true # per case: runs, seconds, outcomes
if [ "$torture_rc" != 0 ]; then
  echo "the torture run found defects (above; logs in build/torture/torture-logs)"
  echo "$passed passed, 1 failed"
  exit 1
fi
passed=$((passed + 1))

step "ThreadSanitizer (gcc; Swift's clang runtime wants libdispatch) and ctest"
cmake -S . -B build/tsan -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DTERN_TSAN=ON >/dev/null
cmake --build build/tsan -j"$JOBS"
run_ctest build/tsan env TSAN_OPTIONS=halt_on_error=1

step "fuzz the response parser, the content decoders and a server's HTTP/2 bytes for ${FUZZ_SECONDS}s each, the NTLM challenge parser for half that, the SOCKS answers for a quarter"
cmake -S . -B build/fuzz -DCMAKE_C_COMPILER="$CLANG" -DTERN_FUZZ=ON -DTERN_BUILD_TESTS=OFF \
  -DTERN_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build/fuzz -j"$JOBS" --target fuzz_http1_parse fuzz_decode fuzz_ntlm fuzz_socks fuzz_http2 2>&1 | grep -v "Cannot export local symbol '__asan" || true
for target in http1_parse decode ntlm socks http2; do
  corpus=$(mktemp -d)
  cp Tests/Fuzz/corpus/$target/* "$corpus"/
  dict=()
  [ "$target" = http1_parse ] && dict=(-dict=Tests/Fuzz/http.dict)
  [ "$target" = http2 ] && dict=(-dict=Tests/Fuzz/http2.dict)
  # The stats on success; on a finding, the report and the input's path (the tail alone would
  # hide what failed).
  seconds=$FUZZ_SECONDS
  # The SOCKS answers are a few bytes with a handful of branches: a quarter of the time covers them.
  [ "$target" = socks ] && seconds=$(( (FUZZ_SECONDS + 3) / 4 ))
  # The NTLM challenge is one bounded message with a list of pairs: half the time.
  [ "$target" = ntlm ] && seconds=$(( (FUZZ_SECONDS + 1) / 2 ))
  if ! build/fuzz/fuzz_$target -max_total_time="$seconds" "${dict[@]}" \
    -print_final_stats=1 "$corpus" >"build/fuzz-$target.log" 2>&1; then
    grep -vE '^(INFO|#[0-9])' "build/fuzz-$target.log" | tail -n 40
    echo "fuzz_$target found a failure (input saved as crash-*/leak-* in $ROOT)"
    echo "$passed passed, 1 failed"
    exit 1
  fi
  tail -n 5 "build/fuzz-$target.log"
  rm -rf "$corpus"
done

step "install, build examples/fetch.c through pkg-config, valgrind, resume, flat memory"
scripts/check-install.sh

step "Python: libtern installed to a prefix, pip install ./python into build/python-venv, pytest"
scripts/check-python.sh | tee build/check-python.log
passed=$((passed + $(sed -n 's/^python: \([0-9]*\) passed$/\1/p' build/check-python.log)))

# `swift test` runs every test target of the package: TernTests and TernOpenAPITests (the
# OpenAPI transport under a generated client), here and under TSan below.
step "Swift: build with warnings as errors, then swift test (Swift Testing, same servers)"
swift build -Xswiftc -warnings-as-errors --build-tests 2>&1 | tail -n 1
# Bounded, like every long step: a hung test fails here (about 4 minutes normally), not at CI's
# limit, and the bounded run prints what hung (the tests still running, every thread's stack).
set +e
scripts/swift-test-bounded.sh 1200 build/swift-test.log
swift_rc=$?
set -e
grep -E "^(✘|✔ Test run)|error:" build/swift-test.log || true
line=$(grep -E "Test run with [0-9]+ tests? .*(passed|failed)" build/swift-test.log | tail -n1) || true
if [ "$swift_rc" != 0 ] || ! grep -q "✔ Test run with" <<<"$line"; then
  echo "swift test failed (exit $swift_rc): ${line:-no summary}"
  echo "$passed passed, 1 failed"
  exit 1
fi
passed=$((passed + $(sed -E 's/.*with ([0-9]+) tests?.*/\1/' <<<"$line")))

step "Swift tests under ThreadSanitizer (swift test --sanitize=thread, scratch path .build-tsan)"
# Its own scratch path, so that the plain build above is not rebuilt. The `tern` binary the CLI
# tests run is built with TSan too; the tests start it with atexit_sleep_ms=0 in TSAN_OPTIONS
# (TSan's default sleeps 1 s at every exit). A race report fails the step even when every test
# passed.
# The build (about 10 minutes on 2 cores) and the run are bounded apart, so a slow build is not
# taken for a hung test.
# TERN_PTHREAD_LOCKS: the request's lock is a pthread mutex there, which TSan understands
# (Synchronization.Mutex's futex path is invisible to it); see Request.StorageLock.
tsan_flags=(--sanitize=thread --scratch-path .build-tsan -Xswiftc -DTERN_PTHREAD_LOCKS)
timeout -k 10 2400 swift build "${tsan_flags[@]}" --build-tests \
  >build/swift-build-tsan.log 2>&1 || { tail -n 30 build/swift-build-tsan.log; echo "$passed passed, 1 failed"; exit 1; }
set +e
scripts/swift-test-bounded.sh 1200 build/swift-test-tsan.log "${tsan_flags[@]}"
tsan_rc=$?
set -e
grep -E "^(✘|✔ Test run)|error:|WARNING: ThreadSanitizer" build/swift-test-tsan.log || true
line=$(grep -E "Test run with [0-9]+ tests? .*(passed|failed)" build/swift-test-tsan.log | tail -n1) || true
races=$(grep -c "WARNING: ThreadSanitizer" build/swift-test-tsan.log || true)
if [ "$tsan_rc" != 0 ] || [ "$races" != 0 ] || ! grep -q "✔ Test run with" <<<"$line"; then
  echo "swift test --sanitize=thread failed (exit $tsan_rc, $races race reports): ${line:-no summary}"
  echo "see build/swift-test-tsan.log"
  echo "$passed passed, 1 failed"
  exit 1
fi
passed=$((passed + $(sed -E 's/.*with ([0-9]+) tests?.*/\1/' <<<"$line")))

step "cache conformance: the cache-tests corpus through tern --cache (private-cache mode)"
# Fails only when a test that checks a response must not be reused fails (or the run cannot
# be done); the totals, next to the browsers', and every failure are in
# Tests/Conformance/cache-tests/RESULTS.md. The debug `tern` the Swift step built.
TERN="$ROOT/.build/debug/tern" scripts/check-cache-conformance.sh
passed=$((passed + 1))

step "examples/swift-everyday: a package using Tern by path builds and does the README's tasks (and the signed file transfer)"
# Its own scratch path under build/ (outside git). The program checks every result and exits
# non-zero when a task fails; its output is shown either way. Servers in a state dir of its own.
ex=(--package-path examples/swift-everyday --scratch-path build/swift-everyday)
if ! swift build "${ex[@]}" -Xswiftc -warnings-as-errors >build/swift-everyday.log 2>&1; then
  tail -n 40 build/swift-everyday.log
  echo "examples/swift-everyday does not build (build/swift-everyday.log)"
  echo "$passed passed, 1 failed"
  exit 1
fi
ex_bin=$(swift build "${ex[@]}" --show-bin-path)
ex_state=$(mktemp -d)
chmod 755 "$ex_state" # the test servers (Apache as www-data, squid as proxy) read below it
trap 'python3 Tests/TestServer/servers.py stop "$ex_state" >/dev/null 2>&1 || true; rm -rf "$ex_state"' EXIT
python3 Tests/TestServer/servers.py start "$ex_state" >/dev/null
ex_nginx=http://127.0.0.1:$(sed -n 's/^NGINX_PORT=//p' "$ex_state/env")
ex_fault=http://127.0.0.1:$(sed -n 's/^FAULT_PORT=//p' "$ex_state/env")
ex_rc=0
timeout 60 "$ex_bin/first" "$ex_nginx/64k.txt" || ex_rc=$?
[ "$ex_rc" = 0 ] && { timeout 60 "$ex_bin/everyday" "$ex_nginx" "$ex_fault" || ex_rc=$?; }
# Mesibo's signed file transfer: upload and signed download through the reference file server.
ex_file=http://127.0.0.1:$(sed -n 's/^FILE_PORT=//p' "$ex_state/env")/upload
[ "$ex_rc" = 0 ] && { head -c 3000000 /dev/urandom >"$ex_state/photo.bin" &&
  timeout 60 "$ex_bin/filetransfer" "$ex_file" 123 token "$ex_state/photo.bin" || ex_rc=$?; }
python3 Tests/TestServer/servers.py stop "$ex_state" >/dev/null 2>&1 || true
rm -rf "$ex_state"
trap - EXIT
if [ "$ex_rc" != 0 ]; then
  echo "examples/swift-everyday failed (exit $ex_rc; 124: timed out)"
  echo "$passed passed, 1 failed"
  exit 1
fi
passed=$((passed + 1))

step "the tern CLI's memory is flat (release build, static Swift runtime)"
scripts/check-cli-memory.sh

step "the README's examples are the code that runs, and the demo (the main job) works"
scripts/check-readme.sh
scripts/check-header.sh
scripts/check-layers.py
scripts/format.sh --check
scripts/demo.sh

if [ -x bench/run ]; then
  # The Swift drivers (async-http-client, URLSession) take minutes to build in release mode, so
  # CI smoke-tests the C drivers, wrk and the parser benchmarks; `bench/run` runs them all.
  step "benchmark drivers still follow the contract: bench/run --smoke --c-only"
  bench/run --smoke --c-only
fi

step_done
echo
echo "scripts/test.sh: all steps passed"
echo "$passed passed, $failed failed"
