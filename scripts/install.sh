#!/usr/bin/env bash
# scripts/install.sh [PREFIX] — builds Tern from this tree and installs it into PREFIX
# (default /usr/local):
#   PREFIX/include/tern.h, PREFIX/LIBDIR/libtern.so and libtern.a, LIBDIR/pkgconfig/tern.pc,
#   LIBDIR/cmake/tern/ (find_package(tern)), PREFIX/bin/tern-pac (when duktape is there);
#   PREFIX/bin/tern, the command-line tool (needs Swift 6: on PATH or in /opt/swift/usr/bin),
#   with its man page (share/man/man1/tern.1) and its bash, zsh and fish completions.
# What the build needs and lacks (cmake, pkg-config, a C compiler, the -dev packages of libuv,
# OpenSSL, zlib, nghttp2, brotli, zstd, duktape) is installed with apt-get first. Root (or sudo)
# is asked for only for that, for writing into a PREFIX the user may not write, and for
# ldconfig when LIBDIR is one of the system's library directories.
# Running it again is quick: both builds are incremental and unchanged files are not copied.
# Environment: JOBS (parallel build jobs, default: the number of cores), TERN_INSTALL_BUILD
# (the CMake build directory, default build/install in this tree).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${1:-/usr/local}
case "$PREFIX" in
  /*) ;;
  *) PREFIX="$(pwd)/$PREFIX" ;;
esac
PREFIX=${PREFIX%/}
[ -n "$PREFIX" ] || PREFIX=/
JOBS=${JOBS:-$(nproc)}
BUILD=${TERN_INSTALL_BUILD:-$ROOT/build/install}
LOG="$BUILD/install.log"

say() { echo "install: $*"; }
die() { echo "install: FAILED: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "root is needed for: $* (run as root, or install sudo)"
  fi
}

# Runs "$@" quietly into the log; on failure shows the log's end.
logged() {
  if ! "$@" >>"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    die "$* (the whole log: $LOG)"
  fi
}

# ---- what the build needs ----
missing=""     # Debian packages to install
lacking=""     # what is missing, by name, for systems without apt-get
need_tool() { # need_tool COMMAND DEBIAN-PACKAGE
  command -v "$1" >/dev/null 2>&1 || { missing="$missing $2"; lacking="$lacking $1"; }
}
need_tool cmake cmake
need_tool pkg-config pkg-config
need_tool cc build-essential
need_tool make build-essential
for pair in libuv:libuv1-dev openssl:libssl-dev zlib:zlib1g-dev libnghttp2:libnghttp2-dev \
  libbrotlidec:libbrotli-dev libzstd:libzstd-dev duktape:duktape-dev; do
  module=${pair%%:*}
  if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists "$module"; then
    missing="$missing ${pair#*:}"
    lacking="$lacking $module"
  fi
done
if [ -n "$missing" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    missing=$(echo $missing | tr ' ' '\n' | sort -u | tr '\n' ' ')
    say "installing the build's dependencies: $missing"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    say "missing:$lacking"
    die "install these with your system's package manager (libbrotlidec, libzstd and duktape are optional), then run this again"
  fi
fi
# The optional ones may still be absent (a system without apt-get): the build leaves them out.

# ---- where PREFIX may be written ----
# Root is needed when the nearest existing directory on the way to PREFIX is not ours to write.
writable_prefix() {
  local d="$PREFIX"
  while [ ! -d "$d" ]; do d=$(dirname "$d"); done
  [ -w "$d" ] && { [ ! -d "$PREFIX" ] || [ -w "$PREFIX" ]; }
}
if writable_prefix; then
  put() { "$@"; }
else
  say "$PREFIX is not writable by $(id -un): installing with root"
  put() { as_root "$@"; }
fi
# install -C copies only what changed (re-runs touch nothing), -D makes the directories.
put_file() { put install -C -D -m "$1" "$2" "$3"; }

# ---- the C library, header, pkg-config file, CMake package, tern-pac ----
mkdir -p "$BUILD"
: >"$LOG"
say "building libtern (CMake, in $BUILD)"
logged cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DTERN_BUILD_TESTS=OFF -DTERN_BUILD_EXAMPLES=OFF
logged cmake --build "$BUILD" -j"$JOBS"
logged put cmake --install "$BUILD"
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
case "$libdir" in
  /*) ;;
  *) libdir="$PREFIX/$libdir" ;;
esac
version=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --modversion tern)
say "installed libtern $version: $PREFIX/include/tern.h, $libdir/libtern.so, $libdir/libtern.a,"
say "  $libdir/pkgconfig/tern.pc, $libdir/cmake/tern/"
[ -x "$PREFIX/bin/tern-pac" ] && say "installed $PREFIX/bin/tern-pac (proxy auto-config scripts)"

# ---- the tern command-line tool, its man page and completions ----
SWIFT=""
if command -v swift >/dev/null 2>&1; then
  SWIFT=$(command -v swift)
elif [ -x /opt/swift/usr/bin/swift ]; then
  SWIFT=/opt/swift/usr/bin/swift
fi
cli=0
if [ -z "$SWIFT" ]; then
  echo "install: NOTE: Swift was not found (neither on PATH nor in /opt/swift/usr/bin), so the" >&2
  echo "install: NOTE: tern command-line tool, its man page and completions are NOT installed." >&2
  echo "install: NOTE: The C library is. Install Swift 6 (swift.org) and run this again for the tool." >&2
else
  export PATH="$(dirname "$SWIFT"):$PATH"
  say "building the tern command-line tool (swift build -c release; the first build takes minutes)"
  swift_flags=(-c release --product tern --static-swift-stdlib --package-path "$ROOT")
  logged "$SWIFT" build "${swift_flags[@]}"
  bin=$("$SWIFT" build "${swift_flags[@]}" --show-bin-path 2>>"$LOG")
  [ -x "$bin/tern" ] || die "swift build made no $bin/tern"
  put_file 755 "$bin/tern" "$PREFIX/bin/tern"
  tern_version=$("$PREFIX/bin/tern" -V 2>/dev/null | head -n1 || true)
  say "installed $PREFIX/bin/tern${tern_version:+ ($tern_version)}"
  cli=1

  if [ -f "$ROOT/docs/tern.1" ]; then
    put_file 644 "$ROOT/docs/tern.1" "$PREFIX/share/man/man1/tern.1"
    say "installed $PREFIX/share/man/man1/tern.1"
  else
    say "NOTE: docs/tern.1 is not in this tree: no man page installed"
  fi

  # swift-argument-parser writes the completion scripts.
  comp=$(mktemp -d)
  trap 'rm -rf "$comp"' EXIT
  for shell in bash zsh fish; do
    "$PREFIX/bin/tern" --generate-completion-script "$shell" >"$comp/$shell" 2>>"$LOG" \
      || die "tern --generate-completion-script $shell failed"
    [ -s "$comp/$shell" ] || die "tern --generate-completion-script $shell wrote nothing"
  done
  put_file 644 "$comp/bash" "$PREFIX/share/bash-completion/completions/tern"
  put_file 644 "$comp/zsh" "$PREFIX/share/zsh/site-functions/_tern"
  put_file 644 "$comp/fish" "$PREFIX/share/fish/vendor_completions.d/tern.fish"
  say "installed completions: $PREFIX/share/bash-completion/completions/tern,"
  say "  $PREFIX/share/zsh/site-functions/_tern, $PREFIX/share/fish/vendor_completions.d/tern.fish"
fi

# ---- the dynamic linker's cache ----
# The directories ldconfig searches (ld.so.conf and the trusted ones), compared as real paths.
system_libdir=0
real_libdir=$(realpath "$libdir")
for d in $( (ldconfig -v -N -X 2>/dev/null || /sbin/ldconfig -v -N -X 2>/dev/null || true) |
  sed -n 's/^\(\/[^:]*\):.*/\1/p') /lib /usr/lib /lib64 /usr/lib64; do
  [ -d "$d" ] && [ "$(realpath "$d")" = "$real_libdir" ] && system_libdir=1
done
if [ "$system_libdir" = 1 ]; then
  as_root ldconfig
  say "ran ldconfig ($libdir is a system library directory)"
else
  say "$libdir is not a system library directory: programs built with"
  say "  \`pkg-config --cflags --libs tern\` (PKG_CONFIG_PATH=$libdir/pkgconfig) carry a run path to it"
fi

case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) [ "$cli" = 1 ] && say "NOTE: $PREFIX/bin is not on PATH" ;;
esac
say "ok"
