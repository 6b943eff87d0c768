#!/usr/bin/env bash
# The Python package as a user gets it: libtern built and installed to a prefix
# (build/python-prefix), `pip install ./python` into build/python-venv against that prefix's
# tern.pc, then the pytest suite (python/tests) against the shared test servers, run from
# outside the source tree so the installed package is what is tested. Prints
# "python: N passed" for scripts/test.sh.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"
py=$(scripts/python-venv.sh)
cmake -S . -B build/release -DTERN_WERROR=ON >/dev/null
cmake --build build/release -j"$JOBS" --target tern_shared >/dev/null
prefix="$ROOT/build/python-prefix"
rm -rf "$prefix"
cmake --install build/release --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n1)
export PKG_CONFIG_PATH="${libdir}pkgconfig"
# --no-build-isolation: build with the venv's cffi and setuptools (no download per run).
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall ./python >build/python-pip.log 2>&1 || {
  cat build/python-pip.log
  echo "check-python: pip install ./python failed"
  exit 1
}
echo "installed: tern $("$py" -c 'import tern; print(tern.__version__, "over libtern", tern.engine_version())')"
cd "$ROOT/build"
# Bounded: a hang (a request never started or never completed) fails this step in minutes
# instead of running into CI's limit; the suite takes about 30 s.
PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 timeout -s ABRT -k 10 600 \
  "$py" -m pytest -p no:cacheprovider -q -rfE --durations=5 "$ROOT/python/tests" "$@" \
  2>&1 | tee "$ROOT/build/python-test.log"
rc=${PIPESTATUS[0]}
cd "$ROOT"
line=$(grep -E '^[0-9]+ passed' build/python-test.log | tail -n1 || true)
if [ "$rc" != 0 ] || grep -qE '[0-9]+ (failed|error)' <<<"$line" || [ -z "$line" ]; then
  echo "check-python: pytest failed (exit $rc)"
  exit 1
fi
echo "python: $(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line") passed"
