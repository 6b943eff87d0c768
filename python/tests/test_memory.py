"""No leak: 100,000 requests through one client leave the process's memory flat."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

import tern
from conftest import live_requests_settle


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


@pytest.mark.slow
def test_100k_requests_leave_rss_flat(servers, capsys):
    url = servers.nginx("/1k.bin")
    with tern.Client() as client:
        for _ in range(5_000):  # warm-up: pools, allocator arenas, interned strings
            client.get(url)
        gc.collect()
        before = rss_kib()
        t = time.monotonic()
        for _ in range(100_000):
            r = client.get(url)
            assert r.status_code == 200
        seconds = time.monotonic() - t
        gc.collect()
        after = rss_kib()
        stats = client.stats()
    with capsys.disabled():  # the figures, in the suite's output
        print(f"\n100,000 GETs in {seconds:.1f} s ({100_000 / seconds:.0f}/s): "
              f"RSS {before} KiB before, {after} KiB after ({after - before:+d} KiB)")
    # One connection, and a second once nginx's keepalive_requests (100,000) closes the first.
    assert stats["connections_opened"] <= 2 and stats["reused"] >= 104_000
    assert live_requests_settle() == 0
    assert after - before < 4096, f"RSS grew by {after - before} KiB over 100,000 requests"


@pytest.mark.slow
def test_async_requests_leave_rss_flat(servers, capsys):
    url = servers.nginx("/1k.bin")

    async def batch(client, n):
        for _ in range(n // 50):
            await asyncio.gather(*(client.get(url) for _ in range(50)))

    async def main():
        async with tern.AsyncClient(max_connections_per_origin=4) as client:
            await batch(client, 2_000)
            gc.collect()
            before = rss_kib()
            await batch(client, 20_000)
            gc.collect()
            return before, rss_kib()

    before, after = asyncio.run(main())
    with capsys.disabled():
        print(f"\n20,000 async GETs: RSS {before} KiB before, {after} KiB after ({after - before:+d} KiB)")
    assert live_requests_settle() == 0
    assert after - before < 4096
