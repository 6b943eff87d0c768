#!/usr/bin/env bash
# Runs an already built `swift test` with a time bound, and when the bound is reached says why:
# the tests that started and never ended, and every thread's stack in the test process (gdb), so
# a hang seen once on CI can be diagnosed from CI's output alone.
#
#   scripts/swift-test-bounded.sh SECONDS LOG [swift test arguments...]
#
# Exit status: swift test's own, or 124 when the bound was reached. The log gets swift test's
# output; LOG.hang gets the stacks.
set -uo pipefail
limit=$1
log=$2
shift 2

# The processes started by `swift test` (the test binary, the programs the tests run): only
# this run's, never another checkout's.
descendants() {
  local child
  for child in $(pgrep -P "$1" || true); do
    echo "$child"
    descendants "$child"
  done
}

# --verbose makes Swift Testing print a line as each test starts, not only as it ends.
swift test --skip-build --verbose "$@" >"$log" 2>&1 &
runner=$!
deadline=$(($(date +%s) + limit))
while kill -0 "$runner" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "swift test still running after ${limit} s: the tests that started and did not end:"
    # Started lines are "◇ Test name() started."; ends are "✔/✘ Test name() passed/failed ...".
    grep -E '^(◇|✔|✘) Test .*\) (started|passed|failed)' "$log" |
      sed -E 's/^(.) Test (.*\)) (started|passed|failed).*/\1 \2/' |
      awk '{ mark = $1; $1 = ""; if (mark == "◇") open[$0] = 1; else delete open[$0] }
           END { for (t in open) print "  " t }' | sort
    hang="$log.hang"
    : >"$hang"
    tree=$(descendants "$runner")
    for pid in $tree; do
      grep -q 'PackageTests.xctest' /proc/"$pid"/cmdline 2>/dev/null || continue
      echo "== process $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-200)" >>"$hang"
      if command -v gdb >/dev/null; then
        timeout 120 gdb -p "$pid" -batch -nx -ex "set pagination off" \
          -ex "thread apply all bt 30" >>"$hang" 2>&1 || true
      fi
    done
    # Other programs the tests started (the tern CLI, servers) may be what is waited for.
    ps -eo pid,ppid,etimes,args --forest | grep -vE 'ps -eo|grep' | tail -n 60 >>"$hang"
    echo "threads stopped in this package's code (all stacks in $hang):"
    grep -nE '^Thread |(Tern|tern_|tern__)' "$hang" | grep -B1 -E 'Tern|tern_' |
      grep -E '^[0-9]+:(Thread|#)' | head -n 120 || true
    # shellcheck disable=SC2086
    kill -ABRT $tree 2>/dev/null || true
    sleep 5
    # shellcheck disable=SC2086
    kill -KILL "$runner" $tree 2>/dev/null || true
    wait "$runner" 2>/dev/null || true
    exit 124
  fi
  sleep 2
done
wait "$runner"
