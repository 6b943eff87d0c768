"""inprocess.py — tern-python beside pycurl, requests and urllib3 in one process, for a figure
steadier than bench/run's on a busy machine.

    taskset -c 1 bench/.venv-python/bin/python bench/drivers/python/inprocess.py \
        http://127.0.0.1:PORT [--n 3000] [--rounds 9] [--c64 9] [--downloads 9] [--dir DIR]

PORT serves bench/run's files (1k.bin, 100m.bin): `bench/run --python-only --keep-serving`
leaves its nginx up, or start nginx with bench/results/state/nginx.conf. Each client is made
once; then every round runs N GETs of 1k.bin one at a time per client (the clients rotating),
every --c64 round runs N GETs 64 at a time on tern.AsyncClient (64 tasks on one event loop)
and on pycurl's CurlMulti (64 handles, each re-added as it ends, as c_pycurl does), and every
download round fetches 100m.bin once per client into DIR (deleted after each run).
Printed: the median wall time and CPU time (user + system, this process: time.process_time)
per request or per GB, and the median of the in-round ratios (tern-python's speed over the
client's, same round): rounds seconds apart see the same load, whole processes minutes apart do not. Start-up
and imports are outside every figure here, unlike bench/run's CPU column.

Each client runs as its bench/run driver does (clients/c_*.py): tern.Client.get (the GIL
released while the loop runs on this thread) and Client.download; one pycurl.Curl with a
counting WRITEFUNCTION, WRITEDATA and a 100 KiB buffer for downloads; urllib3's PoolManager with
stream(1 MiB); a requests Session with iter_content(1 MiB).
"""

import argparse
import os
import statistics
import sys
import time


def tern_get(base):
    import tern

    c = tern.Client(max_connections_per_origin=1)
    url = base + "/1k.bin"

    def one():
        r = c.get(url)
        return len(r.content) == int(r.headers.get("content-length")) and r.status_code == 200

    return one


def pycurl_get(base):
    import pycurl

    h = pycurl.Curl()
    h.setopt(pycurl.URL, base + "/1k.bin")
    h.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
    got = [0]

    def write(data):
        got[0] += len(data)

    h.setopt(pycurl.WRITEFUNCTION, write)

    def one():
        got[0] = 0
        h.perform()
        return (got[0] == int(h.getinfo(pycurl.CONTENT_LENGTH_DOWNLOAD))
                and h.getinfo(pycurl.RESPONSE_CODE) == 200)

    return one


def urllib3_get(base):
    import urllib3

    pm = urllib3.PoolManager(maxsize=1, block=True, retries=False)
    url = base + "/1k.bin"

    def one():
        r = pm.request("GET", url)
        return len(r.data) == int(r.headers.get("content-length")) and r.status == 200

    return one


def tern_get64(base):
    import asyncio

    import tern

    loop = asyncio.new_event_loop()
    client = tern.AsyncClient(max_connections_per_origin=64)
    url = base + "/1k.bin"

    async def worker(tickets, bad):
        for _ in tickets:
            r = await client.get(url)
            if len(r.content) != int(r.headers.get("content-length")) or r.status_code != 200:
                bad.append(r)

    async def batch(n, bad):
        tickets = iter(range(n))
        await asyncio.gather(*(worker(tickets, bad) for _ in range(64)))

    def run(n):
        bad = []
        loop.run_until_complete(batch(n, bad))
        return not bad

    return run


def pycurl_get64(base):
    import pycurl

    m = pycurl.CurlMulti()
    m.setopt(pycurl.M_MAX_HOST_CONNECTIONS, 64)
    got = {}
    handles = []
    for _ in range(64):
        h = pycurl.Curl()
        h.setopt(pycurl.URL, base + "/1k.bin")
        h.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        got[h] = [0]
        h.setopt(pycurl.WRITEFUNCTION, lambda data, g=got[h]: g.__setitem__(0, g[0] + len(data)))
        handles.append(h)

    def run(n):
        started = done = 0
        ok = True
        for h in handles[:min(n, 64)]:
            got[h][0] = 0
            m.add_handle(h)
            started += 1
        while done < n:
            while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                pass
            while True:
                queued, fine, failed = m.info_read()
                for h in fine:
                    m.remove_handle(h)
                    ok = ok and got[h][0] == 1024 and h.getinfo(pycurl.RESPONSE_CODE) == 200
                    done += 1
                    if started < n:
                        got[h][0] = 0
                        m.add_handle(h)
                        started += 1
                if failed:
                    return False
                if not queued:
                    break
            if done < n:
                m.select(1.0)
        return ok

    return run


def tern_dl(base, path):
    import tern

    c = tern.Client()
    return lambda: c.download(base + "/100m.bin", path).status_code == 200


def pycurl_dl(base, path):
    import pycurl

    h = pycurl.Curl()
    h.setopt(pycurl.URL, base + "/100m.bin")
    h.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
    h.setopt(pycurl.BUFFERSIZE, 100 * 1024)

    def one():
        with open(path, "wb") as f:
            h.setopt(pycurl.WRITEDATA, f)
            h.perform()
        return h.getinfo(pycurl.RESPONSE_CODE) == 200

    return one


def urllib3_dl(base, path):
    import urllib3

    pm = urllib3.PoolManager(maxsize=1, block=True, retries=False)

    def one():
        r = pm.request("GET", base + "/100m.bin", preload_content=False)
        with open(path, "wb") as f:
            for chunk in r.stream(1 << 20):
                f.write(chunk)
        r.release_conn()
        return r.status == 200

    return one


def requests_dl(base, path):
    import requests

    s = requests.Session()

    def one():
        with s.get(base + "/100m.bin", stream=True) as r, open(path, "wb") as f:
            for chunk in r.iter_content(1 << 20):
                f.write(chunk)
        return r.status_code == 200

    return one


def rounds(fns, rounds, reps, cleanup=None, batch=False):
    """{name: [(wall, cpu) per round]}, the clients rotating from round to round (batch: each
    function makes all reps requests of a round in one call)."""
    names = list(fns)
    out = {k: [] for k in names}
    for i in range(rounds):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            one = fns[name]
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(1 if batch else reps):
                if not (one(reps) if batch else one()):
                    sys.exit("%s: a wrong response" % name)
            out[name].append((time.perf_counter() - t0, time.process_time() - c0))
            if cleanup:
                cleanup(name)
    return out


def report(title, res, unit, per):
    print(title)
    base = res["tern"]
    for name, runs in res.items():
        wall = statistics.median(w for w, _ in runs) / per
        cpu = statistics.median(c for _, c in runs) / per
        # tern-python's speed over this client's, round by round (its wall time over tern's)
        ratios = [r[0] / b[0] for r, b in zip(runs, base)]
        print("  %-9s wall %8.2f %s  CPU %8.2f %s  tern-python's speed / this one's: %.2fx "
              "median [%.2f..%.2f]" % (name, wall, unit, cpu, unit, statistics.median(ratios),
                                       min(ratios), max(ratios)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="http://127.0.0.1:PORT, serving 1k.bin and 100m.bin")
    ap.add_argument("--n", type=int, default=3000, help="GETs per client per round")
    ap.add_argument("--rounds", type=int, default=9, help="GET rounds (0: none)")
    ap.add_argument("--c64", type=int, default=9, help="rounds of 64 at a time (0: none)")
    ap.add_argument("--downloads", type=int, default=9, help="download rounds (0: none)")
    ap.add_argument("--dir", default="/tmp", help="where downloads are written")
    o = ap.parse_args()
    base = o.base.rstrip("/")
    if o.rounds:
        fns = {"tern": tern_get(base), "pycurl": pycurl_get(base), "urllib3": urllib3_get(base)}
        for one in fns.values():  # connect, warm up
            for _ in range(50):
                one()
        res = rounds(fns, o.rounds, o.n)
        report("GET 1 KiB, one at a time: %d rounds of %d per client (µs per request)"
               % (o.rounds, o.n), {k: [(w * 1e6, c * 1e6) for w, c in v] for k, v in res.items()},
               "µs", o.n)
    if o.c64:
        fns = {"tern": tern_get64(base), "pycurl": pycurl_get64(base)}
        for run in fns.values():  # connect, warm up
            run(640)
        res = rounds(fns, o.c64, o.n, batch=True)
        report("GET 1 KiB, 64 at a time: %d rounds of %d per client (µs per request)"
               % (o.c64, o.n), {k: [(w * 1e6, c * 1e6) for w, c in v] for k, v in res.items()},
               "µs", o.n)
    if o.downloads:
        paths = {k: os.path.join(o.dir, "inprocess-%s.bin" % k)
                 for k in ("tern", "requests", "urllib3", "pycurl")}
        fns = {"tern": tern_dl(base, paths["tern"]), "requests": requests_dl(base, paths["requests"]),
               "urllib3": urllib3_dl(base, paths["urllib3"]), "pycurl": pycurl_dl(base, paths["pycurl"])}
        res = rounds(fns, o.downloads, 1, cleanup=lambda k: os.unlink(paths[k]))
        gb = 100 * (1 << 20) / 1e9
        report("100 MiB to a file: %d rounds (s per GB; speed ratios as above)" % o.downloads,
               res, "s/GB", gb)


if __name__ == "__main__":
    main()
