"""requests: one Session whose HTTPAdapter keeps a pool of C connections (pool_maxsize=C,
blocking when all are busy). C = 1: a plain loop. C > 1: C threads share the session.
Downloads: stream=True and iter_content in 1 MiB chunks written to the file."""

import requests
from requests.adapters import HTTPAdapter

from bench_common import check_body, threads

CHUNK = 1 << 20


def session(c, cafile):
    s = requests.Session()
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=c, pool_block=True)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.verify = cafile or True
    return s


def get(url, n, c, cafile, clock):
    s = session(c, cafile)

    def one():
        r = s.get(url)
        return check_body(r.status_code, len(r.content), r.headers.get("content-length"))

    if c == 1:
        total = 0
        clock.start()
        for _ in range(n):
            total += one()
        clock.stop()
        return n, total
    return threads(n, c, one, clock)


def download(url, path, cafile, clock):
    s = session(1, cafile)
    got = 0
    clock.start()
    with s.get(url, stream=True) as r, open(path, "wb") as f:
        for chunk in r.iter_content(chunk_size=CHUNK):
            f.write(chunk)
            got += len(chunk)
    clock.stop()
    return check_body(r.status_code, got, r.headers.get("content-length"))
