"""pycurl (built from source against Debian's libcurl, as the C driver curl-multi uses it).
C = 1: one Curl handle, perform() in a loop (the handle keeps its connection). C > 1: a
CurlMulti with C easy handles (CURLMOPT_MAX_HOST_CONNECTIONS C), each re-added as it finishes,
driven by perform() and select(). Bodies are counted in a WRITEFUNCTION, never kept. Downloads:
one handle writing to the file through WRITEDATA with a 100 KiB buffer (as curl-multi)."""

import pycurl

from bench_common import check_body


class Handle:
    def __init__(self, url, cafile):
        self.got = 0
        h = self.curl = pycurl.Curl()
        h.setopt(pycurl.URL, url)
        h.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        h.setopt(pycurl.WRITEFUNCTION, self.write)
        if cafile:
            h.setopt(pycurl.CAINFO, cafile)

    def write(self, data):
        self.got += len(data)

    def finish(self):
        got, self.got = self.got, 0
        length = self.curl.getinfo(pycurl.CONTENT_LENGTH_DOWNLOAD)
        return check_body(self.curl.getinfo(pycurl.RESPONSE_CODE), got,
                          None if length < 0 else int(length))


def get(url, n, c, cafile, clock):
    if c == 1:
        h = Handle(url, cafile)
        total = 0
        clock.start()
        for _ in range(n):
            h.curl.perform()
            total += h.finish()
        clock.stop()
        return n, total
    m = pycurl.CurlMulti()
    m.setopt(pycurl.M_MAX_HOST_CONNECTIONS, c)
    handles = {}
    for _ in range(c):
        h = Handle(url, cafile)
        handles[h.curl] = h
    started = done = total = 0
    clock.start()
    for curl in handles:
        m.add_handle(curl)
        started += 1
    while done < n:
        while True:
            ret, _ = m.perform()
            if ret != pycurl.E_CALL_MULTI_PERFORM:
                break
        while True:
            queued, ok, failed = m.info_read()
            for curl in ok:
                m.remove_handle(curl)
                total += handles[curl].finish()
                done += 1
                if started < n:
                    m.add_handle(curl)
                    started += 1
            if failed:
                curl, code, msg = failed[0]
                raise pycurl.error(code, msg)
            if not queued:
                break
        if done < n:
            m.select(1.0)
    clock.stop()
    return done, total


def download(url, path, cafile, clock):
    h = pycurl.Curl()
    h.setopt(pycurl.URL, url)
    h.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
    h.setopt(pycurl.BUFFERSIZE, 100 * 1024)
    if cafile:
        h.setopt(pycurl.CAINFO, cafile)
    with open(path, "wb") as f:
        h.setopt(pycurl.WRITEDATA, f)
        clock.start()
        h.perform()
        clock.stop()
        got = f.tell()
    length = h.getinfo(pycurl.CONTENT_LENGTH_DOWNLOAD)
    return check_body(h.getinfo(pycurl.RESPONSE_CODE), got, None if length < 0 else int(length))
