"""driver.py — the benchmark driver contract for Python HTTP clients.

    python driver.py CLIENT get URL N C        N GETs of URL, C at a time over C connections
    python driver.py CLIENT download URL PATH  one GET, the body written to PATH
    (fanout, idle, upload: exit 3)

CLIENT names a module in clients/ (tern, tern_async, tern_threads, requests, httpx, httpx_async, aiohttp, urllib3,
pycurl); bench/drivers/python/py-* are launchers that pass it. Each module has

    get(url, n, c, cafile, clock)   -> (requests, body_bytes)
    download(url, path, cafile, clock) -> body_bytes

and raises on any failure (a status other than 200, a body shorter or longer than its
Content-Length). The module makes its client first, then calls clock.start() right before its
request loop and clock.stop() right after, so elapsed_s covers the loop only, as for the C and
Swift drivers. Exit codes, the result line and $BENCH_CAFILE are as bench/README.md says.
"""

import importlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = ("tern", "tern_async", "tern_threads", "requests", "httpx", "httpx_async", "aiohttp",
           "urllib3", "pycurl")


class Clock:
    def __init__(self):
        self.t0 = self.t1 = None

    def start(self):
        self.t0 = time.perf_counter()

    def stop(self):
        self.t1 = time.perf_counter()

    @property
    def elapsed(self):
        if self.t0 is None or self.t1 is None:
            raise RuntimeError("the client module did not start and stop the clock")
        return self.t1 - self.t0


def usage():
    sys.stderr.write(__doc__)
    sys.exit(2)


def main(argv):
    if len(argv) < 3 or argv[0] not in CLIENTS:
        usage()
    client, mode, args = argv[0], argv[1], argv[2:]
    if mode not in ("get", "download"):
        sys.stderr.write("%s: unsupported: %s\n" % (client, mode))
        return 3
    try:
        if mode == "get":
            url, n, c = args[0], int(args[1]), int(args[2])
            if n < 1 or c < 1:
                raise ValueError
            c = min(c, n)
        else:
            url, path = args
    except (ValueError, IndexError):
        usage()
    cafile = os.environ.get("BENCH_CAFILE") or None
    sys.path.insert(0, os.path.join(HERE, "clients"))
    mod = importlib.import_module("c_" + client)
    clock = Clock()
    try:
        if mode == "get":
            if not hasattr(mod, "get"):
                sys.stderr.write("%s: unsupported: get\n" % client)
                return 3
            done, nbytes = mod.get(url, n, c, cafile, clock)
            if done != n:
                raise RuntimeError("%d of %d requests completed" % (done, n))
        else:
            nbytes = mod.download(url, path, cafile, clock)
            done = 1
    except Exception as e:  # noqa: BLE001 - any failure is exit 1 with its message
        sys.stderr.write("%s: %s: %s: %s\n" % (client, mode, type(e).__name__, e))
        return 1
    sys.stdout.write("elapsed_s=%.6f requests=%d bytes=%d\n" % (clock.elapsed, done, nbytes))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
