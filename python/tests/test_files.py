"""Downloads to files (resume, ranges, progress, cancel), uploads from files, multipart forms
streamed from disk."""

from __future__ import annotations

import hashlib
import os
import re
import threading

import pytest

import tern


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_download_writes_the_file_and_reports_progress_in_the_calling_thread(servers, client, tmp_path):
    target = tmp_path / "64k.txt"
    reports = []
    threads = set()

    def progress(p: tern.Progress) -> None:
        reports.append(p)
        threads.add(threading.get_ident())

    r = client.download(servers.nginx("/64k.txt"), target, progress=progress)
    assert r.status_code == 200 and r.path == str(target) and r.content == b""
    assert sha(target.read_bytes()) == servers.must("SHA_64K")
    assert not (tmp_path / "64k.txt.part").exists()
    downloads = [p for p in reports if p.phase == "download"]
    assert downloads[-1].percent == 100 and downloads[-1].done == downloads[-1].total == 65536
    assert [p.percent for p in downloads] == sorted(p.percent for p in downloads)
    assert threads == {threading.get_ident()}


def test_downloads_share_a_big_buffered_connection_of_their_own(servers, tmp_path):
    # A download reads through a 1 MiB buffer: its connection is pooled apart from the 64 KiB
    # one of other requests, and reused by the next download.
    with tern.Client() as c:
        c.get(servers.nginx("/1k.bin"))
        c.download(servers.nginx("/64k.txt"), tmp_path / "a")
        r = c.download(servers.nginx("/64k.txt"), tmp_path / "b")
        assert r.reused_connection and c.stats()["connections_opened"] == 2
        assert sha((tmp_path / "b").read_bytes()) == servers.must("SHA_64K")
    # A client that sets buffer_size has one size for every request.
    with tern.Client(buffer_size=65536) as c:
        c.get(servers.nginx("/1k.bin"))
        assert c.download(servers.nginx("/64k.txt"), tmp_path / "c").reused_connection
        assert c.stats()["connections_opened"] == 1


def test_download_resumes_byte_identical(servers, client, tmp_path):
    whole = (servers.www / "64k.txt").read_bytes()
    target = tmp_path / "resumed.txt"
    target.write_bytes(whole[:20000])
    r = client.download(servers.nginx("/64k.txt"), target, resume=True)
    assert r.status_code == 206 and r.offset == 20000
    assert target.read_bytes() == whole
    # Complete already: a 416 counts as success and the file stays.
    r = client.download(servers.nginx("/64k.txt"), target, resume=True)
    assert target.read_bytes() == whole


def test_download_range(servers, client, tmp_path):
    whole = (servers.www / "64k.txt").read_bytes()
    target = tmp_path / "range.bin"
    r = client.download(servers.nginx("/64k.txt"), target, offset=100, end=300)
    assert r.status_code == 206
    assert target.read_bytes() == whole[100:300]


def test_failed_download_never_touches_a_good_file(servers, client, tmp_path):
    target = tmp_path / "keep.bin"
    target.write_bytes(b"good")
    r = client.download(servers.nginx("/missing.bin"), target)
    assert r.status_code == 404 and target.read_bytes() == b"good"
    with pytest.raises(tern.NetworkError):
        client.download(servers.fault("/truncate?len=100000"), target)
    assert target.read_bytes() == b"good"


def test_progress_returning_true_cancels(servers, client, tmp_path):
    target = tmp_path / "cancel.bin"
    with pytest.raises(tern.Cancelled) as info:
        client.download(servers.fault("/ok?size=10000000&drip_ms=20&drip_bytes=65536"), target,
                        progress=lambda p: p.done > 0)
    assert info.value.name == "ECANCELED"
    assert not target.exists()


def test_an_exception_in_progress_cancels_and_propagates(servers, client, tmp_path):
    def boom(p):
        raise KeyError("from progress")

    with pytest.raises(KeyError):
        client.download(servers.fault("/ok?size=1000000&drip_ms=20&drip_bytes=65536"),
                        tmp_path / "x", progress=boom)
    assert client.stats()["requests_active"] == 0


def test_upload_from_file_and_put_to_nginx(servers, client, tmp_path):
    src = tmp_path / "up.bin"
    data = os.urandom(300_000)
    src.write_bytes(data)
    reports = []
    r = client.post(servers.fault("/echo"), content=tern.File(src), progress=reports.append)
    echo = r.json()
    assert echo["body_length"] == len(data) and echo["body_sha256"] == sha(data)
    uploads = [p for p in reports if p.phase == "upload"]
    assert uploads and uploads[-1].percent == 100 and uploads[-1].done == len(data)
    # A byte range of the file, and an open file from its position.
    r = client.post(servers.fault("/echo"), content=tern.File(src, offset=10, end=1010))
    assert r.json()["body_sha256"] == sha(data[10:1010])
    with open(src, "rb") as f:
        f.seek(299_000)
        assert client.post(servers.fault("/echo"), content=f).json()["body_sha256"] == sha(data[299_000:])
    # PUT onto nginx's WebDAV location, then read it back.
    client.put(servers.nginx("/upload/py-up.bin"), content=tern.File(src)).raise_for_status()
    assert client.get(servers.nginx("/upload/py-up.bin")).content == data


def test_multipart_form_streams_files_from_disk(servers, client, tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"alpha\n" * 1000)
    b = tmp_path / "b.bin"
    b.write_bytes(os.urandom(100_000))
    with open(b, "rb") as fb:
        r = client.post(
            servers.fault("/echo"),
            data={"title": "two files", "n": 2},
            files={"first": a, "second": ("renamed.bin", fb, "application/x-test"),
                   "third": tern.File(a, filename="t.txt", content_type="text/x-t", end=6),
                   "mem": ("m.txt", b"in memory")},
        )
    echo = r.json()
    ctype = dict((k.lower(), v) for k, v in echo["headers"])["content-type"]
    boundary = re.fullmatch(r"multipart/form-data; boundary=(\S+)", ctype).group(1)

    def part(name, body, filename=None, ct=None):
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
        if filename is not None:
            head += f'; filename="{filename}"\r\nContent-Type: {ct}'
        return head.encode() + b"\r\n\r\n" + body + b"\r\n"

    expected = (part("title", b"two files") + part("n", b"2")
                + part("first", a.read_bytes(), "a.txt", "text/plain")
                + part("second", b.read_bytes(), "renamed.bin", "application/x-test")
                + part("third", b"alpha\n", "t.txt", "text/x-t")
                + part("mem", b"in memory", "m.txt", "text/plain")
                + f"--{boundary}--\r\n".encode())
    assert echo["body_length"] == len(expected)
    assert echo["body_sha256"] == sha(expected)


def test_missing_upload_file_is_a_file_error(servers, client, tmp_path):
    with pytest.raises(tern.FileError) as info:
        client.post(servers.fault("/echo"), content=tern.File(tmp_path / "nope"))
    assert info.value.name == "EFILEREAD"
