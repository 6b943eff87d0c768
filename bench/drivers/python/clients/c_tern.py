"""tern-python, its fastest way per workload (what py-tern reports): C = 1, a plain loop on a
synchronous tern.Client (each request waits in C with the GIL released); C > 1, one
tern.AsyncClient with C asyncio tasks sharing the N requests (c_tern_async), which measured
faster than C threads on one Client (c_tern_threads). Downloads: Client.download, written to
the file by the engine."""

import c_tern_async
import c_tern_threads


def get(url, n, c, cafile, clock):
    if c == 1:
        return c_tern_threads.get(url, n, c, cafile, clock)
    return c_tern_async.get(url, n, c, cafile, clock)


def download(url, path, cafile, clock):
    return c_tern_threads.download(url, path, cafile, clock)
