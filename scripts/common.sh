# Shared by the scripts: tool locations.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-$(nproc)}
if [ -x /opt/swift/usr/bin/clang ]; then CLANG=/opt/swift/usr/bin/clang; else CLANG=clang-14; fi
export PATH="/opt/swift/usr/bin:$PATH"
