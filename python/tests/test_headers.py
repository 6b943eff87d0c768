"""A response's header fields read from the engine's block without splitting it
(tern._models.ResponseHeaders): the same answers as Headers of the same pairs."""

from __future__ import annotations

import pytest

from tern._models import Headers, ResponseHeaders


def look_block(pairs):
    """The lookup block the C glue makes (tern_py_put_look), made here from the pairs."""
    merged = {}
    for k, v in pairs:
        low = k.encode("latin-1").lower()
        merged[low] = merged[low] + b", " + v.encode("latin-1") if low in merged else v.encode("latin-1")
    return b"".join(b"\n" + k + b"\0" + v for k, v in merged.items()) + b"\n"


def block_headers(pairs, look=False, strings=b"OK\0http://h/\0\0"):
    """ResponseHeaders as build_response makes them: the response's other strings, then the
    field block, with (look=True) or without the lookup block."""
    h = ResponseHeaders()
    fields = b"\0" + b"".join(k.encode("latin-1") + b"\0" + v.encode("latin-1") + b"\0"
                              for k, v in pairs)
    h._raw = strings + fields + (look_block(pairs) if look else b"")
    h._start = len(strings)
    h._look = len(strings) + len(fields) if look else 0
    return h


PAIRS = [("Content-Type", "text/plain"), ("Set-Cookie", "a=1"), ("X-Name", "set-cookie"),
         ("set-cookie", "b=2"), ("Content-Length", "12"), ("X-Empty", ""), ("X-L", "caf\xe9")]


@pytest.mark.parametrize("name", ["content-type", "CONTENT-LENGTH", "Set-Cookie", "x-name",
                                  "x-empty", "x-l", "missing", "set", "cookie", "a=1", "text/plain",
                                  "X-Name\0set-cookie", "caf\xe9", "", "x-name\nset-cookie",
                                  "x-name\0"])
@pytest.mark.parametrize("look", [False, True])
def test_lookups_match_headers(name, look):
    h, ref = block_headers(PAIRS, look), Headers(PAIRS)
    assert h.get(name) == ref.get(name)
    assert h.get(name, "dflt") == ref.get(name, "dflt")
    assert (name in h) == (name in ref)
    if name in ref:
        assert h[name] == ref[name]
    else:
        with pytest.raises(KeyError):
            h[name]


@pytest.mark.parametrize("look", [False, True])
def test_a_value_that_reads_as_a_name_is_not_a_name(look):
    h = block_headers([("X-A", "content-length"), ("content-length", "5")], look)
    assert h["content-length"] == "5" and h.get_list("x-a") == ["content-length"]
    assert "x-b" not in block_headers([("X-A", "x-b")], look)


@pytest.mark.parametrize("look", [False, True])
def test_pairs_and_changes(look):
    h = block_headers(PAIRS, look)
    assert h.multi_items() == PAIRS and list(h) == list(Headers(PAIRS))
    assert h.get_list("set-cookie") == ["a=1", "b=2"] and len(h) == len(Headers(PAIRS))
    h["Content-Length"] = "13"
    del h["set-cookie"]
    assert h["content-length"] == "13" and "Set-Cookie" not in h and h.get("x-l") == "caf\xe9"
    assert Headers(h) == h
    assert block_headers([], look).multi_items() == [] and block_headers([], look).get("a") is None


def test_lookups_with_odd_names():
    h = block_headers(PAIRS, True)
    for name in (b"content-type", 3, None):
        with pytest.raises((TypeError, AttributeError)):
            h.get(name)  # type: ignore[arg-type]
    assert 3 not in h and b"x" not in h


@pytest.mark.parametrize("look", [False, True])
def test_the_strings_before_the_fields_are_not_fields(look):
    # build_response's block starts with the reason phrase and URL: names and values that
    # read as fields there are not fields.
    h = block_headers([("X-A", "1")], look, strings=b"content-length\0x-b\0http://h/x-c\0\0")
    assert h.get("content-length") is None and "x-b" not in h and h.get("x-a") == "1"
    assert h.multi_items() == [("X-A", "1")]
