"""urllib3: one PoolManager holding C connections per host (maxsize=C, block=True).
C = 1: a plain loop. C > 1: C threads share the pool manager. Downloads:
preload_content=False and stream() in 1 MiB chunks written to the file."""

import urllib3

from bench_common import check_body, threads

CHUNK = 1 << 20


def manager(c, cafile):
    kw = {"ca_certs": cafile, "cert_reqs": "CERT_REQUIRED"} if cafile else {}
    return urllib3.PoolManager(maxsize=c, block=True, retries=False, **kw)


def get(url, n, c, cafile, clock):
    pm = manager(c, cafile)

    def one():
        r = pm.request("GET", url)
        return check_body(r.status, len(r.data), r.headers.get("content-length"))

    if c == 1:
        total = 0
        clock.start()
        for _ in range(n):
            total += one()
        clock.stop()
        return n, total
    return threads(n, c, one, clock)


def download(url, path, cafile, clock):
    pm = manager(1, cafile)
    got = 0
    clock.start()
    r = pm.request("GET", url, preload_content=False)
    with open(path, "wb") as f:
        for chunk in r.stream(CHUNK):
            f.write(chunk)
            got += len(chunk)
    r.release_conn()
    clock.stop()
    return check_body(r.status, got, r.headers.get("content-length"))
