"""The synchronous API: requests, responses, headers, bodies, errors."""

from __future__ import annotations

import hashlib
import json
import threading
import time

import pytest

import tern
from conftest import live_requests_settle


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_module_get_returns_the_file(servers):
    r = tern.get(servers.nginx("/1k.bin"))
    assert r.status_code == 200
    assert r.reason_phrase == "OK"
    assert r.http_version == "HTTP/1.1"
    assert sha(r.content) == servers.must("SHA_1K")
    assert r.headers["content-length"] == "1024"
    assert r.headers["Content-Length"] == "1024"
    assert "CONTENT-TYPE" in r.headers
    assert r.url == servers.nginx("/1k.bin")
    assert r.ok and r.is_success and r.elapsed > 0


def test_params_headers_and_json_body_reach_the_server(servers, client):
    r = client.post(
        servers.fault("/echo"),
        params={"q": "a b", "n": [1, 2]},
        headers={"X-Custom": "v1", "Accept": "application/json"},
        json={"name": "tern", "n": 3},
    )
    echo = r.json()
    assert echo["method"] == "POST"
    assert echo["target"] == "/echo?q=a+b&n=1&n=2"
    sent = {k.lower(): v for k, v in echo["headers"]}
    assert sent["x-custom"] == "v1"
    assert sent["accept"] == "application/json"
    assert sent["content-type"] == "application/json"
    body = json.dumps({"name": "tern", "n": 3}, separators=(",", ":")).encode()
    assert echo["body_length"] == len(body)
    assert echo["body_sha256"] == sha(body)


def test_form_data_and_raw_content(servers, client):
    r = client.post(servers.fault("/echo"), data={"a": "1", "b": "x y"})
    echo = r.json()
    assert echo["body_sha256"] == sha(b"a=1&b=x+y")
    assert ["Content-Type", "application/x-www-form-urlencoded"] in echo["headers"]
    r = client.put(servers.fault("/echo"), content=b"\x00raw\xff", headers={"Content-Type": "x/y"})
    assert r.json()["method"] == "PUT"
    assert r.json()["body_sha256"] == sha(b"\x00raw\xff")


def test_headers_are_case_insensitive_and_keep_repeated_fields(servers, client):
    r = client.get(servers.fault("/status/200"), params=[("header", "Set-Cookie:a=1"),
                                                        ("header", "Set-Cookie:b=2")])
    assert r.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert r.headers["SET-COOKIE"] == "a=1, b=2"
    h = tern.Headers({"A": "1"})
    h["a"] = "2"
    assert dict(h) == {"a": "2"} and h == {"A": "2"}


@pytest.mark.parametrize("plain", [True, False])
def test_header_lookups_match_the_fields(servers, client, plain):
    # Lookups read the engine glue's lookup block (repeats joined, names lowered); every answer
    # must be the one the fields as pairs give, on the plain path and the long one.
    fields = ["X-A:x-b", "X-B:1", "x-b:2", "X-Empty:", "X-Dup:a", "X-DUP:b", "x-dup:c",
              "X-Colon:a:b", "Server-Timing:x-a"]
    url = servers.fault("/status/200?" + "&".join("header=" + f for f in fields))
    r = client.get(url) if plain else client.get(url, timeout=30)
    assert r.headers._look  # the glue made a lookup block
    ref = tern.Headers(r.headers.multi_items())
    for name in ("x-a", "X-B", "x-b", "x-empty", "x-dup", "X-COLON", "server-timing", "x-c",
                 "content-length", "Content-Type", "", "x-", "1"):
        assert r.headers.get(name) == ref.get(name), name
        assert (name in r.headers) == (name in ref), name
        if name in ref:
            assert r.headers[name] == ref[name]
    assert r.headers["x-b"] == "1, 2" and r.headers["x-dup"] == "a, b, c"
    assert r.headers["x-empty"] == "" and r.headers["x-colon"] == "a:b"


def test_header_lookups_beyond_the_lookup_blocks_fields(servers, client):
    # More fields than the glue makes a lookup block for (64): the field block is searched.
    fields = [f"X-F{i % 40}:{i}" for i in range(80)]
    r = client.get(servers.fault("/status/200?" + "&".join("header=" + f for f in fields)))
    assert not r.headers._look
    assert r.headers["x-f3"] == "3, 43" and r.headers.get("X-F39") == "39, 79"
    assert "x-f40" not in r.headers and r.headers.get("content-length") == "0"


def test_client_defaults_and_base_url(servers):
    with tern.Client(base_url=servers.fault("/"), headers={"X-Default": "d"},
                     params={"p": "1"}) as c:
        echo = c.get("echo", headers={"X-Call": "c"}).json()
    assert echo["target"] == "/echo?p=1"
    sent = dict((k.lower(), v) for k, v in echo["headers"])
    assert sent["x-default"] == "d" and sent["x-call"] == "c"


def test_plain_calls_send_the_clients_headers_as_they_change(servers):
    # A call with no keyword argument takes the short way (the client's defaults, kept as one
    # C template), which must see every change to client.headers.
    with tern.Client(headers={"X-A": "1"}) as c:
        def sent():
            return {k.lower(): v for k, v in c.get(servers.fault("/echo")).json()["headers"]}

        assert sent()["x-a"] == "1"
        c.headers["X-B"] = "2"
        assert sent()["x-b"] == "2"
        del c.headers["x-a"]
        got = sent()
        assert "x-a" not in got and got["x-b"] == "2"
        c.headers.update({"X-B": "3"})
        assert sent()["x-b"] == "3"
        c.headers.setdefault("X-C", "4")
        assert sent()["x-c"] == "4"
        c.headers.pop("X-C")
        assert "x-c" not in sent()
        c.headers.clear()
        assert "x-b" not in sent()
        c.headers["X-D"] = "5"
        assert sent()["x-d"] == "5"


def test_plain_calls_of_a_client_whose_options_need_the_long_way(servers):
    # A base URL (or params, auth, ...) is more than a template carries: the plain call goes
    # the long way, before and after a change of the headers.
    def sent(c):
        return {k.lower(): v for k, v in c.get("echo").json()["headers"]}

    with tern.Client(base_url=servers.nginx("/"), headers={"X-A": "1"}) as c:
        assert c.get("1k.bin").status_code == 200
        c.headers["X-A"] = "2"
        r = c.get("1k.bin")
        assert r.status_code == 200 and len(r.content) == 1024
    with tern.Client(base_url=servers.fault("/"), headers={"X-A": "1"}) as c:
        assert sent(c)["x-a"] == "1"
        c.headers["X-A"] = "2"  # the changed header is what the long way sends
        assert sent(c)["x-a"] == "2"


def test_plain_and_keyword_calls_give_the_same_response(servers, client):
    url = servers.nginx("/redirect/1k.bin")
    plain = client.get(url)
    long = client.get(url, timeout=tern.Timeout())  # any keyword: the long way
    for r in (plain, long):
        assert r.status_code == 200 and r.reason_phrase == "OK" and r.http_version == "HTTP/1.1"
        assert r.url == servers.nginx("/1k.bin") and r.num_redirects == 1
        assert sha(r.content) == servers.must("SHA_1K") and r.path is None and r.offset == 0
        assert r.tls_version is None and r.decoded_encoding is None and r.elapsed > 0
    skip = {"date", "x-connection", "x-connection-requests"}
    assert ([(k, v) for k, v in plain.headers.multi_items() if k.lower() not in skip]
            == [(k, v) for k, v in long.headers.multi_items() if k.lower() not in skip])
    head = client.head(servers.nginx("/64k.txt"))
    assert head.content == b"" and head.headers["content-length"] == "65536"


@pytest.mark.parametrize("plain", [True, False])
def test_fields_read_late_are_the_responses_own(servers, client, plain):
    # A response's strings, version, timing and header fields are decoded when first read,
    # from its own copy: later requests (the same slot's scratch, the reused connection, other
    # statuses and URLs) must not change what an earlier response says.
    kw = {} if plain else {"timeout": 30}
    first = client.get(servers.nginx("/redirect/1k.bin"), **kw)
    second = client.get(servers.fault("/status/404?header=X-A:late"), **kw)
    third = client.get(servers.nginx("/1k.bin"), **kw)
    assert third.reused_connection and third.num_redirects == 0 and third.url.endswith("/1k.bin")
    assert first.url == servers.nginx("/1k.bin") and first.reason_phrase == "OK"
    assert first.num_redirects == 1 and first.http_version == "HTTP/1.1" and first.offset == 0
    assert first.elapsed > 0 and first.tls_version is None and first.decoded_encoding is None
    assert first.headers["content-length"] == "1024" and "x-a" not in first.headers
    assert second.status_code == 404 and second.reason_phrase == "Not Found"
    assert second.url == servers.fault("/status/404?header=X-A:late")
    assert second.headers["x-a"] == "late" and not second.reused_connection
    assert sha(first.content) == servers.must("SHA_1K") and repr(second) == "<Response [404 Not Found]>"
    # and as set
    first.url, first.reason_phrase, first.elapsed, first.reused_connection = "u", "R", 2.0, True
    first.http_version, first.num_redirects, first.offset = "HTTP/1.0", 3, 7
    first.tls_version, first.decoded_encoding = "TLSv1.3", "gzip"
    assert (first.url, first.reason_phrase, first.elapsed, first.reused_connection,
            first.http_version, first.num_redirects, first.offset, first.tls_version,
            first.decoded_encoding) == ("u", "R", 2.0, True, "HTTP/1.0", 3, 7, "TLSv1.3", "gzip")
    made = tern.Response(201, tern.Headers({"A": "1"}), b"x", "http://h/", reason_phrase="Created")
    assert (made.url, made.reason_phrase, made.http_version, made.elapsed, made.tls_version,
            made.offset, made.headers["a"]) == ("http://h/", "Created", "HTTP/1.1", 0.0, None, 0, "1")


def test_every_method_takes_the_plain_way_and_the_long_one(servers, client):
    # Client's methods are made by one factory (_client._method): each sends its own method,
    # with and without keyword arguments, and keeps its name and documentation.
    for name in ("get", "options", "delete", "post", "put", "patch"):
        call = getattr(client, name)
        assert call.__name__ == name and call.__qualname__ == "Client." + name and call.__doc__
        for kw in ({}, {"timeout": 30}):
            assert call(servers.fault("/echo"), **kw).json()["method"] == name.upper()
    assert client.head(servers.fault("/echo")).content == b""


def test_client_reuses_its_connection(servers, client):
    first = client.get(servers.nginx("/1k.bin"))
    second = client.get(servers.nginx("/1k.bin"))
    assert first.headers["X-Connection"] == second.headers["X-Connection"]
    assert second.reused_connection
    assert client.stats()["connections_opened"] == 1


def test_status_codes_are_responses_and_raise_for_status(servers, client):
    r = client.get(servers.fault("/status/404"))
    assert r.status_code == 404 and not r.ok
    with pytest.raises(tern.HTTPStatusError) as info:
        r.raise_for_status()
    assert info.value.response is r
    assert isinstance(info.value, tern.TernError)
    assert client.get(servers.fault("/status/204")).raise_for_status().content == b""


def test_head_reads_no_body(servers, client):
    r = client.head(servers.nginx("/64k.txt"))
    assert r.status_code == 200 and r.content == b""
    assert r.headers["content-length"] == "65536"


def test_text_uses_the_charset(servers, client):
    r = client.get(servers.fault("/status/200"),
                   params=[("header", "Content-Type:text/plain; charset=latin-1"), ("size", "0")])
    assert r.encoding == "latin-1"
    r.content = "é".encode("latin-1")
    assert r.text == "é"


def test_gzip_is_decoded(servers, client):
    r = client.get(servers.nginx("/gzip/64k.txt"))
    assert r.decoded_encoding == "gzip"
    assert sha(r.content) == servers.must("SHA_64K")
    plain = client.get(servers.nginx("/gzip/64k.txt"), headers={"Accept-Encoding": "identity"})
    assert plain.decoded_encoding is None
    with tern.Client(decompress=False) as c:
        r = c.get(servers.nginx("/gzip/64k.txt"))
    assert r.decoded_encoding is None and "content-encoding" not in r.headers
    assert sha(r.content) == servers.must("SHA_64K")


def test_connection_refused_carries_the_engine_message_and_name():
    with pytest.raises(tern.ConnectError) as info:
        tern.get("http://127.0.0.1:1/")
    err = info.value
    assert err.name == "ECONNREFUSED" and err.code < 0
    assert "127.0.0.1:1" in err.message and "refused" in err.message
    assert isinstance(err, ConnectionError) and isinstance(err, tern.TernError)
    assert "[ECONNREFUSED]" in str(err)


def test_bad_url_and_bad_header_are_usage_errors():
    with pytest.raises(tern.InvalidURL) as info:
        tern.get("ftp://example.org/")
    assert info.value.name == "EBADURL"
    with pytest.raises(tern.UsageError) as info:
        tern.get("http://127.0.0.1:1/", headers={"Bad Name": "x"})
    assert info.value.name == "EBADHEADER"


def test_per_phase_timeouts(servers, client):
    with pytest.raises(tern.HeadersTimeout) as info:
        client.get(servers.fault("/slowheaders?delay_ms=3000"), timeout=tern.Timeout(headers=0.3))
    assert info.value.name == "EHEADERTIMEOUT" and isinstance(info.value, TimeoutError)
    t = time.monotonic()
    with pytest.raises(tern.BodyTimeout):
        client.get(servers.fault("/stall?stall_ms=3000"), timeout=0.3)
    assert time.monotonic() - t < 2
    with pytest.raises(tern.TotalTimeout):
        client.get(servers.fault("/ok?size=100000&drip_ms=100&drip_bytes=1000"),
                   timeout=tern.Timeout(total=0.3))
    with pytest.raises(tern.ConnectTimeout):  # a TLS handshake that never completes
        client.get(servers.https("TLS_STALL_PORT", "/"), timeout=(0.3, 5))


def test_broken_responses_raise_network_and_protocol_errors(servers, client):
    with pytest.raises(tern.NetworkError) as info:
        client.get(servers.fault("/truncate"))
    assert info.value.name == "EPARTIAL"
    with pytest.raises(tern.ProtocolError) as info:
        client.get(servers.fault("/badstatus?variant=garbage"))
    assert info.value.name == "EPROTO"


def test_a_closed_client_refuses_requests(servers):
    c = tern.Client()
    c.close()
    assert c.is_closed
    with pytest.raises(tern.ClosedError):
        c.get(servers.nginx("/1k.bin"))
    c.close()  # idempotent


def test_close_fails_requests_in_flight_in_other_threads(servers):
    c = tern.Client()
    errors = []

    def run():
        try:
            c.get(servers.fault("/slowheaders?delay_ms=5000"))
        except tern.TernError as exc:
            errors.append(exc)

    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.3)
    c.close()
    th.join(5)
    assert not th.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], tern.ClosedError)


def test_close_from_another_thread_fails_the_creating_threads_request(servers):
    # The creating thread's requests run on its own loop: another thread's close() cancels
    # them and takes the loop over once they have ended.
    c = tern.Client()
    closer = threading.Timer(0.3, c.close)
    closer.start()
    t = time.monotonic()
    with pytest.raises(tern.ClosedError):
        c.get(servers.fault("/slowheaders?delay_ms=5000"))
    assert time.monotonic() - t < 3
    closer.join(5)
    assert not closer.is_alive(), "close() from another thread did not return"
    assert c.is_closed
    with pytest.raises(tern.ClosedError):
        c.get(servers.nginx("/1k.bin"))
    assert live_requests_settle() == 0


def test_close_from_another_thread_during_a_loop_of_plain_requests(servers):
    # The creating thread's plain calls hold its engine in C, not under a Python lock: a close()
    # from another thread (while a third reads the counters) waits for the hold to end, frees
    # the engine, and every later call fails with ClosedError. Repeated so that the close lands
    # at different points of a call.
    url = servers.nginx("/1k.bin")
    for delay in (0.0, 0.001, 0.01, 0.05):
        c = tern.Client()
        assert c.get(url).status_code == 200
        stop = threading.Event()
        stats = []

        def read_stats():
            while not stop.is_set():
                stats.append(c.stats()["requests_completed"])

        reader = threading.Thread(target=read_stats)
        closer = threading.Timer(delay, c.close)
        reader.start()
        closer.start()
        done = 0
        t = time.monotonic()
        with pytest.raises(tern.ClosedError):
            while time.monotonic() - t < 10:
                r = c.get(url)
                assert r.status_code == 200 and len(r.content) == 1024
                done += 1
        closer.join(5)
        stop.set()
        reader.join(5)
        assert not closer.is_alive() and not reader.is_alive()
        assert c.is_closed and stats
        assert c.stats()["requests_completed"] == 0  # the engine is gone
        with pytest.raises(tern.ClosedError):
            c.get(url)
        with pytest.raises(tern.ClosedError):
            c.get(url, headers={"X-A": "1"})  # the long way too
        c.close()  # idempotent
    assert live_requests_settle() == 0


def test_close_from_a_progress_callback_frees_the_engine_when_the_request_ends(servers):
    # close() on the creating thread while its request holds the engine (a progress callback
    # runs inside the request): the request is cancelled and fails with ClosedError, calls
    # from then on are refused, and the engine is freed as the request lets go of it.
    c = tern.Client()
    assert c.get(servers.nginx("/1k.bin")).status_code == 200
    seen = []

    def progress(p):
        if not seen:
            c.close()
            seen.append(c.stats()["connections_open"])  # still there (nginx's, the fault server's)
            with pytest.raises(tern.ClosedError):
                c.get(servers.nginx("/1k.bin"))

    with pytest.raises(tern.ClosedError):
        c.get(servers.fault("/ok?size=100000&drip_ms=100&drip_bytes=1000"), progress=progress)
    assert seen == [2]
    assert c.stats()["connections_open"] == 0  # freed as the request ended
    with pytest.raises(tern.ClosedError):
        c.get(servers.nginx("/1k.bin"))
    assert live_requests_settle() == 0


def test_creating_and_other_threads_each_have_an_engine(servers):
    with tern.Client() as c:
        assert c.get(servers.nginx("/1k.bin")).status_code == 200
        other = []
        th = threading.Thread(target=lambda: other.append(c.get(servers.nginx("/1k.bin"))))
        th.start()
        th.join()
        assert other[0].status_code == 200
        # Two engines, one pool each; the counters add up.
        assert c.stats()["connections_opened"] == 2
        assert c.stats()["requests_completed"] == 2
        # Back on the creating thread: its connection is reused.
        assert c.get(servers.nginx("/1k.bin")).reused_connection


def test_a_progress_callback_may_send_a_request_on_the_same_thread(servers, client):
    inner = []

    def progress(p):
        if not inner:
            inner.append(client.get(servers.nginx("/1k.bin")))

    r = client.get(servers.nginx("/64k.txt"), progress=progress)
    assert r.status_code == 200 and sha(r.content) == servers.must("SHA_64K")
    assert inner and inner[0].status_code == 200
    assert sha(inner[0].content) == servers.must("SHA_1K")


def test_the_gil_is_released_while_a_request_waits(servers, client):
    count = 0
    stop = False

    def spin():
        nonlocal count
        while not stop:
            count += 1

    th = threading.Thread(target=spin)
    th.start()
    try:
        client.get(servers.fault("/slowheaders?delay_ms=500"))
    finally:
        stop = True
        th.join()
    # The spinning thread ran nearly the whole half second (hundreds of thousands of loops),
    # not just the interpreter's switch interval now and then.
    assert count > 100_000


def test_threads_share_one_client(servers, client):
    results = []

    def run():
        for _ in range(50):
            results.append(sha(client.get(servers.nginx("/1k.bin")).content))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [servers.must("SHA_1K")] * 400
    assert live_requests_settle() == 0


def test_signal_handlers_may_send_plain_requests_at_any_moment(servers):
    # A plain call nested in another (from a signal handler, at any bytecode of the outer
    # one) takes a slot of its own: each gets its own response, whole, and the nested ones
    # hold the engine alongside the outer one.
    import random
    import signal

    inner = []
    armed = [False]
    small, large = servers.nginx("/1k.bin"), servers.nginx("/64k.txt")

    with tern.Client() as c:
        def handler(signum, frame):
            if armed[0]:
                r = c.get(small)
                inner.append(sha(r.content) == servers.must("SHA_1K"))

        old = signal.signal(signal.SIGALRM, handler)
        try:
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, random.uniform(0.00005, 0.002))
                try:
                    for _ in range(10):
                        r = c.get(large)
                        assert sha(r.content) == servers.must("SHA_64K")
                finally:
                    armed[0] = False
                    signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, old)
        assert len(inner) > 20 and all(inner)
        assert c.get(small).status_code == 200
        assert c.stats()["requests_active"] == 0
    assert live_requests_settle() == 0


def test_ctrl_c_cancels_a_waiting_request(servers, client):
    import _thread

    timer = threading.Timer(0.3, _thread.interrupt_main)  # what Ctrl-C does to the main thread
    timer.start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        client.get(servers.fault("/slowheaders?delay_ms=5000"))
    assert time.monotonic() - t < 2
    assert client.stats()["requests_active"] == 0
    assert client.get(servers.nginx("/1k.bin")).status_code == 200


@pytest.mark.parametrize("kwargs", [{}, {"timeout": 30}], ids=["plain", "keyword"])
def test_signals_at_any_moment_leave_no_request_behind(servers, kwargs):
    # A signal handler's exception may come at any bytecode, also as a C call returns (after
    # a request was made or submitted): thousands of them, at random moments, must leave no
    # request allocated or in flight, and the client working.
    import random
    import signal

    class Boom(Exception):
        pass

    armed = [False]

    def handler(signum, frame):
        if armed[0]:
            armed[0] = False
            raise Boom()

    url = servers.nginx("/1k.bin")
    old = signal.signal(signal.SIGALRM, handler)
    booms = 0
    try:
        with tern.Client() as c:
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                try:
                    try:
                        armed[0] = True
                        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.00005, 0.002))
                        for _ in range(20):
                            c.get(url, **kwargs)
                    finally:
                        armed[0] = False
                        signal.setitimer(signal.ITIMER_REAL, 0)
                except Boom:
                    booms += 1
            assert c.get(url, **kwargs).status_code == 200
            assert c.stats()["requests_active"] == 0
            assert c.stats()["requests_completed"] > 0
        # close() freed the engine (a hold left behind would keep it: its counters read 0 only
        # once it is freed)
        assert c.stats()["requests_completed"] == 0
        assert c.stats()["connections_open"] == 0
    finally:
        signal.signal(signal.SIGALRM, old)
    assert booms > 50
    assert live_requests_settle() == 0


def _close_in_thread_returns(c, timeout: float = 5.0) -> bool:
    th = threading.Thread(target=c.close, daemon=True)
    th.start()
    th.join(timeout)
    return not th.is_alive()


def test_exceptions_at_every_function_entry_of_a_plain_calls_slow_path_leave_nothing(servers):
    # A signal handler runs (and may raise) at a Python function's entry. On a plain call's
    # slow path (fetch handed the request back: here it failed, the port refused), exceptions
    # raised at the entry of each Python function the call enters after fetch, however many,
    # must leave no request and no hold behind: the request freed, a close() from another
    # thread returning, and the engine freed.
    import sys
    import types

    from tern._tern import ffi

    live0 = tern._requests_live()
    c = tern.Client()
    url = "http://127.0.0.1:1/"
    with pytest.raises(tern.TernError):
        c.get(url)  # the slot and template made
    # What a signal handler raising at a function's entry does, at the entry of each of the
    # module's functions (the call's own code between them is C calls).
    mod = sys.modules["tern._client"]
    cuts = []

    def cut_at_entry(name, f):
        def at_entry(*args, **kwargs):
            if len(cuts) < 5:
                cuts.append(name)
                raise KeyboardInterrupt("as a signal handler at " + name + "'s entry")
            return f(*args, **kwargs)
        return at_entry

    saved = {}
    for name, f in list(vars(mod).items()):
        if isinstance(f, types.FunctionType) and f.__module__.startswith("tern"):
            saved[name] = f
            setattr(mod, name, cut_at_entry(name, f))
    try:
        with pytest.raises(KeyboardInterrupt):
            c.get(url)
    finally:
        for name, f in saved.items():
            setattr(mod, name, f)
    assert cuts and cuts[0] == "_fetch_rest", cuts
    slot = c._local.spare
    assert not slot.call.held and slot.cell[0] == ffi.NULL
    with pytest.raises(tern.TernError):
        c.get(url)
    assert c.get(servers.nginx("/1k.bin")).status_code == 200
    assert tern._requests_live() - live0 == 0
    assert _close_in_thread_returns(c), "close() from another thread hangs on a leaked hold"
    assert c.stats()["requests_completed"] == 0  # freed
    assert live_requests_settle() == 0


def test_a_plain_calls_slot_left_with_a_running_request_and_a_hold_is_ended_by_its_next_use(
        servers):
    # Should a plain call's handed-back request and hold be left in its slot all the same, the
    # slot's next fetch ends them first: the request cancelled, run to its end and freed (its
    # waiter not linked twice), the hold let go, so close() from another thread returns.
    from tern._tern import ffi, lib

    live0 = tern._requests_live()
    c = tern.Client()
    assert c.get(servers.nginx("/1k.bin")).status_code == 200
    slot = c._local.spare
    n = lib.tern_py_local_fetch(slot.call, c._tpl.c,
                                servers.fault("/slowheaders?delay_ms=5000").encode(), b"GET")
    assert n == 0 and slot.call.held and slot.cell[0] != ffi.NULL  # running, held: left so
    t = time.monotonic()
    r = c.get(servers.nginx("/1k.bin"))
    assert r.status_code == 200 and len(r.content) == 1024
    assert time.monotonic() - t < 3  # cancelled, not waited for
    assert not slot.call.held and slot.cell[0] == ffi.NULL
    assert c.stats()["requests_active"] == 0
    assert tern._requests_live() - live0 == 0
    assert _close_in_thread_returns(c), "close() from another thread hangs on a leaked hold"
    assert c.stats()["requests_completed"] == 0  # freed
    assert live_requests_settle() == 0


def test_ctrl_c_interrupts_a_close_from_the_main_thread_waiting_on_the_owner(servers):
    # close() from another thread waits for the creating thread to let go of the engine, here
    # busy in a progress callback; Ctrl-C must interrupt that wait promptly, and the owner's
    # end of the request then frees the engine.
    import signal

    box = {}
    started = threading.Event()

    def owner():
        c = tern.Client()
        box["c"] = c

        def progress(p):
            if not started.is_set():
                started.set()
                time.sleep(2)  # user code in a progress callback

        try:
            c.get(servers.fault("/ok?size=100000&drip_ms=100&drip_bytes=1000"), progress=progress)
        except Exception as exc:  # noqa: BLE001
            box["e"] = exc

    th = threading.Thread(target=owner)
    th.start()
    assert started.wait(5)
    main = threading.main_thread().ident
    assert threading.get_ident() == main
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        box["c"].close()
    dt = time.monotonic() - t
    timer.join(5)
    th.join(10)
    assert not th.is_alive()
    assert dt < 1.5, f"Ctrl-C at 0.3 s did not interrupt close(); it took {dt:.2f} s"
    assert isinstance(box.get("e"), tern.ClosedError)
    assert box["c"].stats()["requests_completed"] == 0  # freed by the owner's let-go
    box["c"].close()  # idempotent, returns at once
    assert live_requests_settle() == 0


def test_close_in_a_forked_child_leaves_the_parents_engine_alone(servers):
    # A forked child's copy of the client: close() there refuses new requests and touches
    # nothing of the parent's (no lock, no cancel); the parent's request, in flight across
    # the fork, completes, and the parent's client goes on.
    import os

    c = tern.Client()
    assert c.get(servers.nginx("/1k.bin")).status_code == 200
    child = []

    def progress(p):
        if not child:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    c.close()
                    try:
                        c.get(servers.nginx("/1k.bin"))
                    except tern.ClosedError:
                        code = 0
                finally:
                    os._exit(code)
            child.append(pid)

    r = c.get(servers.fault("/ok?size=100000&drip_ms=20&drip_bytes=20000"), progress=progress)
    assert r.status_code == 200 and len(r.content) == 100000
    _, status = os.waitpid(child[0], 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert c.get(servers.nginx("/1k.bin")).status_code == 200
    c.close()
    assert live_requests_settle() == 0
