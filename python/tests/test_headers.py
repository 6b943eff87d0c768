"""A response's header fields read from the engine's block without splitting it
(tern._models.ResponseHeaders): the same answers as Headers of the same pairs."""

from __future__ import annotations

import pytest

from tern._models import Headers, ResponseHeaders


def block_headers(pairs):
    h = ResponseHeaders.__new__(ResponseHeaders)
    h._raw = b"\0" + b"".join(k.encode("latin-1") + b"\0" + v.encode("latin-1") + b"\0"
                              for k, v in pairs)
    h._low = h._pairs = None
    return h


PAIRS = [("Content-Type", "text/plain"), ("Set-Cookie", "a=1"), ("X-Name", "set-cookie"),
         ("set-cookie", "b=2"), ("Content-Length", "12"), ("X-Empty", ""), ("X-L", "caf\xe9")]


@pytest.mark.parametrize("name", ["content-type", "CONTENT-LENGTH", "Set-Cookie", "x-name",
                                  "x-empty", "x-l", "missing", "set", "cookie", "a=1", "text/plain",
                                  "X-Name\0set-cookie", "caf\xe9", ""])
def test_lookups_match_headers(name):
    h, ref = block_headers(PAIRS), Headers(PAIRS)
    assert h.get(name) == ref.get(name)
    assert h.get(name, "dflt") == ref.get(name, "dflt")
    assert (name in h) == (name in ref)
    if name in ref:
        assert h[name] == ref[name]
    else:
        with pytest.raises(KeyError):
            h[name]


def test_a_value_that_reads_as_a_name_is_not_a_name():
    h = block_headers([("X-A", "content-length"), ("content-length", "5")])
    assert h["content-length"] == "5" and h.get_list("x-a") == ["content-length"]
    assert "x-b" not in block_headers([("X-A", "x-b")])


def test_pairs_and_changes():
    h = block_headers(PAIRS)
    assert h.multi_items() == PAIRS and list(h) == list(Headers(PAIRS))
    assert h.get_list("set-cookie") == ["a=1", "b=2"] and len(h) == len(Headers(PAIRS))
    h["Content-Length"] = "13"
    del h["set-cookie"]
    assert h["content-length"] == "13" and "Set-Cookie" not in h and h.get("x-l") == "caf\xe9"
    assert Headers(h) == h
    assert block_headers([]).multi_items() == [] and block_headers([]).get("a") is None
