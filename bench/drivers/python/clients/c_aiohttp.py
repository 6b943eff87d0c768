"""aiohttp: one ClientSession on a TCPConnector limited to C connections, C tasks on the
default asyncio loop sharing the N requests. Downloads: resp.content.iter_chunked(1 MiB)
written to the file."""

import asyncio
import ssl

import aiohttp

from bench_common import asyncio_tasks, check_body

CHUNK = 1 << 20


def session(c, cafile):
    ctx = ssl.create_default_context(cafile=cafile) if cafile else True
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c, limit_per_host=c,
                                                                ssl=ctx))


def get(url, n, c, cafile, clock):
    async def main():
        async with session(c, cafile) as s:
            async def one():
                async with s.get(url) as r:
                    body = await r.read()
                    return check_body(r.status, len(body), r.headers.get("content-length"))
            return await asyncio_tasks(n, c, one, clock)
    return asyncio.run(main())


def download(url, path, cafile, clock):
    async def main():
        async with session(1, cafile) as s:
            got = 0
            clock.start()
            async with s.get(url) as r:
                with open(path, "wb") as f:
                    async for chunk in r.content.iter_chunked(CHUNK):
                        f.write(chunk)
                        got += len(chunk)
            clock.stop()
            return check_body(r.status, got, r.headers.get("content-length"))
    return asyncio.run(main())
