"""tern-python with threads: one tern.Client (its own engine thread and pool, at most C
connections per origin). C = 1: a plain loop. C > 1: C threads share the client; each request
waits in C with the GIL released. Downloads: Client.download, written by the engine."""

import os

import tern

from bench_common import check_body, threads


def get(url, n, c, cafile, clock):
    client = tern.Client(max_connections_per_origin=c, verify=cafile or True)

    def one():
        r = client.get(url)
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
    client = tern.Client(verify=cafile or True)
    clock.start()
    r = client.download(url, path)
    clock.stop()
    length = r.headers.get("content-length")
    got = os.path.getsize(path) if os.path.isfile(path) else int(length or 0)
    return check_body(r.status_code, got, length)
