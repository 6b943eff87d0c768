"""httpx, synchronous: one httpx.Client limited to C connections (all kept alive).
C = 1: a plain loop. C > 1: C threads share the client. Downloads: client.stream() and
iter_bytes() written to the file."""

import ssl

import httpx

from bench_common import check_body, threads


def client(c, cafile):
    verify = ssl.create_default_context(cafile=cafile) if cafile else True
    return httpx.Client(verify=verify, limits=httpx.Limits(max_connections=c,
                                                           max_keepalive_connections=c))


def get(url, n, c, cafile, clock):
    cl = client(c, cafile)

    def one():
        r = cl.get(url)
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
    cl = client(1, cafile)
    got = 0
    clock.start()
    with cl.stream("GET", url) as r, open(path, "wb") as f:
        for chunk in r.iter_bytes():
            f.write(chunk)
            got += len(chunk)
    clock.stop()
    return check_body(r.status_code, got, r.headers.get("content-length"))
