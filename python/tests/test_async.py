"""The asyncio API: completions through the event loop, concurrency, cancellation."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time

import pytest

import tern
from conftest import live_requests_settle


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run(coro):
    return asyncio.run(coro)


def test_async_get_and_post(servers):
    async def main():
        async with tern.AsyncClient() as client:
            r = await client.get(servers.nginx("/1k.bin"))
            echo = (await client.post(servers.fault("/echo"), json={"a": 1})).json()
            return r, echo

    r, echo = run(main())
    assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
    assert echo["method"] == "POST" and echo["body_length"] == len(b'{"a":1}')


def test_async_plain_calls_send_the_clients_headers_as_they_change(servers):
    # As Client's: a call with no keyword argument is set up from a template of the defaults.
    async def main():
        async with tern.AsyncClient(headers={"X-A": "1"}) as client:
            async def sent():
                r = await client.get(servers.fault("/echo"))
                return {k.lower(): v for k, v in r.json()["headers"]}

            first = await sent()
            client.headers["X-A"] = "2"
            second = await sent()
            with pytest.raises(tern.InvalidURL):  # refused by the template's way: the long way says why
                await client.get("ftp://example.org/")
            return first, second

    first, second = run(main())
    assert first["x-a"] == "1" and second["x-a"] == "2"


def test_one_client_on_several_loops_and_its_engines_go_with_it(servers):
    # Each event loop runs an engine of its own (its libuv loop watched by the event loop);
    # closing the client frees them (an unclosed loop's on that loop, a closed loop's at once),
    # descriptors and all.
    import os

    client = tern.AsyncClient()
    fds = len(os.listdir("/proc/self/fd"))

    async def one():
        return (await client.get(servers.nginx("/1k.bin"))).status_code

    assert run(one()) == 200
    assert run(one()) == 200  # a second loop
    assert len(client._loop_engines) == 2
    run(client.aclose())
    assert not client._loop_engines and not client._completers
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_many_concurrent_requests_share_few_connections(servers):
    async def main():
        async with tern.AsyncClient(max_connections_per_origin=8) as client:
            rs = await asyncio.gather(*(client.get(servers.nginx("/1k.bin")) for _ in range(200)))
            return rs, client.stats()

    rs, stats = run(main())
    assert all(sha(r.content) == servers.must("SHA_1K") for r in rs)
    assert stats["connections_opened"] <= 8 and stats["requests_completed"] == 200


def test_requests_run_concurrently(servers):
    async def main():
        async with tern.AsyncClient() as client:
            t = time.monotonic()
            await asyncio.gather(*(client.get(servers.fault("/slowheaders?delay_ms=500"))
                                   for _ in range(10)))
            return time.monotonic() - t

    assert run(main()) < 2.5  # ten half-second requests at once, not 5 s in a row


def test_errors_are_raised_in_the_task(servers):
    async def main():
        async with tern.AsyncClient() as client:
            with pytest.raises(tern.ConnectError) as info:
                await client.get("http://127.0.0.1:1/")
            assert info.value.name == "ECONNREFUSED"
            with pytest.raises(tern.HeadersTimeout):
                await client.get(servers.fault("/slowheaders?delay_ms=3000"),
                                 timeout=tern.Timeout(headers=0.2))

    run(main())


def test_cancelling_the_task_cancels_the_request(servers):
    async def main():
        async with tern.AsyncClient() as client:
            task = asyncio.ensure_future(client.get(servers.fault("/slowheaders?delay_ms=5000")))
            await asyncio.sleep(0.2)
            assert client.stats()["requests_active"] == 1
            t = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - t < 0.5
            for _ in range(50):  # the engine lets go of it at once
                if client.stats()["requests_active"] == 0:
                    break
                await asyncio.sleep(0.01)
            assert client.stats()["requests_active"] == 0
            # wait_for's timeout cancels in the same way; the client goes on working.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.get(servers.fault("/slowheaders?delay_ms=5000")), 0.2)
            r = await client.get(servers.nginx("/1k.bin"))
            assert r.status_code == 200

    run(main())
    assert live_requests_settle() == 0


def test_async_download_with_progress_on_the_loop_thread(servers, tmp_path):
    target = tmp_path / "a.txt"
    seen = []

    async def main():
        loop_thread = threading.get_ident()
        async with tern.AsyncClient() as client:
            r = await client.download(servers.nginx("/64k.txt"), target,
                                      progress=lambda p: seen.append((p, threading.get_ident())))
            await asyncio.sleep(0)  # progress reports queued before the completion
        return r, loop_thread

    r, loop_thread = run(main())
    assert r.status_code == 200 and sha(target.read_bytes()) == servers.must("SHA_64K")
    assert seen and seen[-1][0].percent == 100
    assert {t for _, t in seen} == {loop_thread}


def test_aclose_fails_requests_in_flight(servers):
    async def main():
        client = tern.AsyncClient()
        task = asyncio.ensure_future(client.get(servers.fault("/slowheaders?delay_ms=5000")))
        await asyncio.sleep(0.2)
        await client.aclose()
        with pytest.raises(tern.ClosedError):
            await task
        with pytest.raises(tern.ClosedError):
            await client.get(servers.nginx("/1k.bin"))

    run(main())


def test_a_closed_loop_does_not_break_the_engine(servers):
    # A request left running when its loop ends: the completion finds no loop and is dropped.
    client = tern.AsyncClient()

    async def main():
        asyncio.ensure_future(client.get(servers.fault("/slowheaders?delay_ms=300")))
        await asyncio.sleep(0.05)

    run(main())
    time.sleep(0.5)

    async def again():
        return await client.get(servers.nginx("/1k.bin"))

    # The dropped completion left the client able to serve the next loop's request.
    r = run(again())
    assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
    run(client.aclose())


def test_plain_requests_take_no_engine_thread(servers):
    # The loop's engine runs on the loop's own thread: no thread is started for it (the
    # threaded engine, for downloads and progress callbacks, is made on first use only).
    import os

    def threads():
        return len(os.listdir("/proc/self/task"))

    async def main():
        before = threads()
        async with tern.AsyncClient() as client:
            rs = await asyncio.gather(*(client.get(servers.nginx("/1k.bin")) for _ in range(20)))
            r = await client.get(servers.nginx("/1k.bin"), headers={"X-A": "1"})
            during = threads()
            assert client._state.handle is None
        return rs + [r], before, during

    rs, before, during = run(main())
    assert all(r.status_code == 200 and len(r.content) == 1024 for r in rs)
    assert during == before


def test_200_gathered_gets_with_the_defaults_against_a_small_server(tmp_path):
    # python3 -m http.server answers one connection at a time and keeps a slow backlog: with
    # the default of 6 connections per origin the 200 requests queue in the engine instead of
    # opening 200 connections at once, and all of them succeed.
    import socket
    import subprocess
    import sys

    payload = b"x" * 2048
    (tmp_path / "f.bin").write_bytes(payload)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "python3 -m http.server did not start"
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/f.bin"

        async def main():
            async with tern.AsyncClient() as client:
                # A bound against a hang, not a speed figure.
                return await asyncio.wait_for(
                    asyncio.gather(*(client.get(url) for _ in range(200))), 120)

        responses = run(main())
        assert len(responses) == 200
        assert all(r.status_code == 200 and r.content == payload for r in responses)
    finally:
        server.kill()
        server.wait()
