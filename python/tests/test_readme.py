"""The README's Python example, run as written (scripts/check-readme.sh checks the copy)."""

from __future__ import annotations

import asyncio
import hashlib


def test_readme_example(servers, tmp_path, capsys):
    site = servers.nginx("")  # nginx: static files
    api = servers.fault("")   # faultserver.py: /echo answers what it received as JSON
    upload = tmp_path / "report.csv"
    upload.write_text("id,value\n1,42\n")
    # README: begin python
    import tern

    r = tern.get(f"{api}/echo", params={"q": "tern"}, headers={"X-Trace": "1"}, timeout=10)
    r.raise_for_status()
    print(r.status_code, r.headers["Content-Type"], r.json()["target"])  # 200 application/json /echo?q=tern

    with tern.Client(base_url=api, timeout=tern.Timeout(connect=5, headers=30, body=30)) as client:
        created = client.post("/echo", json={"name": "tern"}).json()
        form = client.post("/echo", data={"kind": "csv"}, files={"report": upload})  # streamed from disk
        try:
            client.get("http://127.0.0.1:1/")
        except tern.ConnectError as e:
            print(e.name, "-", e.message)  # ECONNREFUSED - connect to 127.0.0.1:1: connection refused

    done = tern.download(f"{site}/64k.txt", tmp_path / "64k.txt", resume=True,
                         progress=lambda p: print(f"{p.phase} {p.percent}%"))

    async def fetch_all(urls):
        async with tern.AsyncClient() as client:
            return await asyncio.gather(*(client.get(u) for u in urls))

    pages = asyncio.run(fetch_all([f"{site}/1k.bin"] * 20))
    # README: end
    out = capsys.readouterr().out
    assert "200 application/json /echo?q=tern" in out
    assert "ECONNREFUSED - connect to 127.0.0.1:1: connection refused" in out
    assert "download 100%" in out
    assert created["method"] == "POST" and created["body_length"] == len('{"name":"tern"}')
    assert form.json()["body_length"] > len("id,value\n1,42\n")
    assert done.status_code == 200
    assert hashlib.sha256((tmp_path / "64k.txt").read_bytes()).hexdigest() == servers.must("SHA_64K")
    assert [p.status_code for p in pages] == [200] * 20
