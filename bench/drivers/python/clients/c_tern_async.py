"""tern-python, asyncio: one tern.AsyncClient (at most C connections per origin), C tasks on
the default asyncio loop sharing the N requests; the client's engine runs on the loop's own
thread (its libuv loop watched with add_reader, completions taken in batches). Downloads:
AsyncClient.download (on the client's engine thread)."""

import asyncio
import os

import tern

from bench_common import asyncio_tasks, check_body


def get(url, n, c, cafile, clock):
    async def main():
        async with tern.AsyncClient(max_connections_per_origin=c, verify=cafile or True) as client:
            async def one():
                r = await client.get(url)
                return check_body(r.status_code, len(r.content), r.headers.get("content-length"))
            return await asyncio_tasks(n, c, one, clock)
    return asyncio.run(main())


def download(url, path, cafile, clock):
    async def main():
        async with tern.AsyncClient(verify=cafile or True) as client:
            clock.start()
            r = await client.download(url, path)
            clock.stop()
            length = r.headers.get("content-length")
            got = os.path.getsize(path) if os.path.isfile(path) else int(length or 0)
            return check_body(r.status_code, got, length)
    return asyncio.run(main())
