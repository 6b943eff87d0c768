"""httpx, asyncio: one httpx.AsyncClient limited to C connections, C tasks on the default
asyncio loop sharing the N requests. Downloads: client.stream() and aiter_bytes() written to
the file."""

import asyncio
import ssl

import httpx

from bench_common import asyncio_tasks, check_body


def client(c, cafile):
    verify = ssl.create_default_context(cafile=cafile) if cafile else True
    return httpx.AsyncClient(verify=verify, limits=httpx.Limits(max_connections=c,
                                                                max_keepalive_connections=c))


def get(url, n, c, cafile, clock):
    async def main():
        async with client(c, cafile) as cl:
            async def one():
                r = await cl.get(url)
                return check_body(r.status_code, len(r.content), r.headers.get("content-length"))
            return await asyncio_tasks(n, c, one, clock)
    return asyncio.run(main())


def download(url, path, cafile, clock):
    async def main():
        async with client(1, cafile) as cl:
            got = 0
            clock.start()
            async with cl.stream("GET", url) as r:
                with open(path, "wb") as f:
                    async for chunk in r.aiter_bytes():
                        f.write(chunk)
                        got += len(chunk)
            clock.stop()
            return check_body(r.status_code, got, r.headers.get("content-length"))
    return asyncio.run(main())
