"""TLS options, redirects, Basic and Digest authentication, proxies."""

from __future__ import annotations

import hashlib

import pytest

import tern


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- TLS ----

def test_https_with_the_test_ca(servers):
    with tern.Client(verify=servers.must("CA_PEM")) as c:
        r = c.get(servers.https("TLS_PORT", "/1k.bin"))
        again = c.get(servers.https("TLS_PORT", "/1k.bin"))
    assert sha(r.content) == servers.must("SHA_1K")
    assert r.tls_version in ("TLSv1.2", "TLSv1.3")
    assert again.reused_connection
    # A CA directory (OpenSSL hashed) works too, per request and per client.
    r = tern.get(servers.https("TLS12_PORT", "/1k.bin"), verify=servers.must("CA_DIR"))
    assert r.tls_version == "TLSv1.2"
    with tern.Client(verify=servers.must("CA_DIR")) as c:
        assert c.get(servers.https("TLS12_PORT", "/1k.bin")).tls_version == "TLSv1.2"
    with tern.Client() as c:  # the system's CAs do not know the test CA
        with pytest.raises(tern.TLSVerifyError):
            c.get(servers.https("TLS_PORT", "/1k.bin"))


def test_http2_over_tls(servers):
    # nginx's h2 listener: ALPN picks HTTP/2, the response says so, requests share the connection.
    with tern.Client(verify=servers.must("CA_PEM")) as c:
        r = c.get(servers.https("H2_TLS_PORT", "/1k.bin"))
        again = c.get(servers.https("H2_TLS_PORT", "/1k.bin"))
    assert r.http_version == "HTTP/2" and r.status_code == 200
    assert sha(r.content) == servers.must("SHA_1K")
    assert again.http_version == "HTTP/2" and again.reused_connection
    # The HTTP/1.1-only listener still answers in HTTP/1.1.
    r = tern.get(servers.https("TLS_PORT", "/1k.bin"), verify=servers.must("CA_PEM"))
    assert r.http_version == "HTTP/1.1"


@pytest.mark.parametrize("key,name", [
    ("TLS_SELFSIGNED_PORT", None),
    ("TLS_EXPIRED_PORT", "ETLSCERTEXPIRED"),
    ("TLS_WRONGHOST_PORT", "ETLSHOSTNAME"),
])
def test_verification_failures(servers, key, name):
    with pytest.raises(tern.TLSVerifyError) as info:
        tern.get(servers.https(key, "/1k.bin"), verify=servers.must("CA_PEM"))
    if name:
        assert info.value.name == name
    assert isinstance(info.value, tern.TLSError)
    with pytest.raises(tern.TLSVerifyError):  # the system store knows no test CA
        tern.get(servers.https("TLS_PORT", "/1k.bin"))


def test_insecure_skips_verification(servers):
    r = tern.get(servers.https("TLS_SELFSIGNED_PORT", "/1k.bin"), verify=False)
    assert sha(r.content) == servers.must("SHA_1K")


def test_client_certificate(servers):
    url = servers.https("TLS_CLIENTCERT_PORT", "/1k.bin")
    ca = servers.must("CA_PEM")
    assert tern.get(url, verify=ca).status_code == 400  # nginx: no certificate sent
    r = tern.get(url, verify=ca, cert=(servers.must("CLIENT_CERT"), servers.must("CLIENT_KEY")))
    assert r.status_code == 200 and r.headers["X-Client-Verify"] == "SUCCESS"
    r = tern.get(url, verify=ca, cert=(servers.must("CLIENT_CERT"), servers.must("CLIENT_KEY_ENC"),
                                      servers.must("CLIENT_KEY_PASSWORD")))
    assert r.status_code == 200
    with pytest.raises(tern.TLSError) as info:
        tern.get(url, verify=ca, cert=(servers.must("CLIENT_CERT"), servers.must("CLIENT_KEY_ENC"),
                                      "wrong"))
    assert info.value.name == "ETLSCERTFILE"


# ---- redirects ----

def test_redirects_are_followed_by_default(servers, client):
    r = client.get(servers.nginx("/redirect/1k.bin"))
    assert r.status_code == 200 and r.num_redirects == 1
    assert r.url == servers.nginx("/1k.bin")
    r = client.get(servers.nginx("/redirect/1k.bin"), follow_redirects=False)
    assert r.status_code == 302 and r.is_redirect
    r = client.get(servers.fault("/redirect-chain?n=3"))
    assert r.num_redirects == 3 and r.json()["path"] == "/redirect-chain"


def test_too_many_redirects(servers):
    with tern.Client(max_redirects=5) as c:
        with pytest.raises(tern.TooManyRedirects) as info:
            c.get(servers.fault("/redirect-loop"))
    assert info.value.name == "ETOOMANYREDIRECTS"


def test_303_after_post_becomes_get(servers, client):
    r = client.post(servers.fault("/redirect?status=303&to=/echo"), content=b"body")
    assert r.json()["method"] == "GET" and r.json()["body_length"] == 0


# ---- authentication ----

def test_basic_auth(servers, client):
    url = servers.nginx("/basic/1k.bin")
    assert client.get(url).status_code == 401
    user, password = servers.must("AUTH_USER"), servers.must("AUTH_PASSWORD")
    r = client.get(url, auth=(user, password))
    assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
    r = client.get(url, auth=(servers.must("AUTH_USER2"), servers.must("AUTH_PASSWORD2")))
    assert r.status_code == 200
    assert client.get(url, auth=(user, "wrong")).status_code == 401


@pytest.mark.parametrize("server,path", [
    ("APACHE_PORT", "/digest/1k.bin"),        # MD5
    ("LIGHTTPD_PORT", "/digest/1k.bin"),      # SHA-256
    ("LIGHTTPD_PORT", "/digest-sha512-256/1k.bin"),
])
def test_digest_auth(servers, server, path):
    url = f"http://127.0.0.1:{servers.port(server)}{path}"
    creds = tern.DigestAuth(servers.must("AUTH_USER"), servers.must("AUTH_PASSWORD"))
    with tern.Client(auth=creds) as c:
        r = c.get(url)
    assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
    r = tern.get(url, auth=tern.AnyAuth(servers.must("AUTH_USER"), servers.must("AUTH_PASSWORD")))
    assert r.status_code == 200
    r = tern.get(url, auth=tern.DigestAuth(servers.must("AUTH_USER"), "wrong"))
    assert r.status_code == 401


def test_digest_post_body_reaches_the_server(servers):
    url = f"http://127.0.0.1:{servers.port('APACHE_PORT')}/nest/apache/echo"
    r = tern.post(url, content=b"x" * 5000,
                  auth=tern.DigestAuth(servers.must("AUTH_USER"), servers.must("AUTH_PASSWORD")))
    assert r.status_code == 200 and r.json()["body_length"] == 5000


# ---- proxies ----

def test_http_and_https_through_squid(servers):
    proxy = f"http://127.0.0.1:{servers.port('SQUID_PORT')}"
    with tern.Client(proxy=proxy, verify=servers.must("CA_PEM")) as c:
        r = c.get(servers.nginx("/1k.bin"))
        assert r.status_code == 200 and "tern-squid" in r.headers["Via"]
        r = c.get(servers.https("TLS_PORT", "/1k.bin"))  # through a CONNECT tunnel
        assert r.status_code == 200 and "Via" not in r.headers
        assert sha(r.content) == servers.must("SHA_1K")


def _dante_connects_to(servers, log: str, port: int) -> int:
    path = f"{servers.must('STATE')}/dante/{log}.log"
    try:
        with open(path) as f:
            return sum(1 for line in f if line.rstrip("\n").endswith(f" 127.0.0.1.{port}"))
    except OSError:
        return 0


def test_http_and_https_through_socks(servers):
    # Dante (SOCKS_PORT) opens a plain tunnel per connection; its log names each target.
    nginx, tls = servers.port("NGINX_PORT"), servers.port("TLS_PORT")
    before = (_dante_connects_to(servers, "open", nginx), _dante_connects_to(servers, "open", tls))
    proxy = f"socks5h://127.0.0.1:{servers.port('SOCKS_PORT')}"
    with tern.Client(proxy=proxy, verify=servers.must("CA_PEM")) as c:
        r = c.get(servers.nginx("/1k.bin"))
        assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
        r = c.get(servers.https("TLS_PORT", "/1k.bin"))
        assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
    assert _dante_connects_to(servers, "open", nginx) == before[0] + 1
    assert _dante_connects_to(servers, "open", tls) == before[1] + 1
    # SOCKS5 with a user name and password (RFC 1929), and a wrong one.
    user, password = servers.must("SOCKS_USER"), servers.must("SOCKS_PASSWORD")
    auth_port = servers.port("SOCKS_AUTH_PORT")
    with tern.Client(proxy=f"socks5://{user}:{password}@127.0.0.1:{auth_port}") as c:
        assert c.get(servers.nginx("/1k.bin")).status_code == 200
    with pytest.raises(tern.ProxyError) as info:
        tern.get(servers.nginx("/1k.bin"), proxy=f"socks5h://{user}:wrong@127.0.0.1:{auth_port}")
    assert "refused the user name and password" in str(info.value)


def test_proxy_authentication(servers):
    proxy = f"http://127.0.0.1:{servers.port('SQUID_AUTH_PORT')}"
    assert tern.get(servers.nginx("/1k.bin"), proxy=proxy).status_code == 407
    creds = (servers.must("AUTH_USER"), servers.must("AUTH_PASSWORD"))
    with tern.Client(proxy=proxy, proxy_auth=creds) as c:  # Digest, per squid's challenge
        assert c.get(servers.nginx("/1k.bin")).status_code == 200
    user = servers.must("AUTH_USER")
    with tern.Client(proxy=f"http://{user}:{servers.must('AUTH_PASSWORD')}@127.0.0.1:"
                           f"{servers.port('SQUID_AUTH_PORT')}") as c:
        assert c.get(servers.nginx("/1k.bin")).status_code == 200


def test_scheme_proxies_and_no_proxy(servers):
    proxy = f"http://127.0.0.1:{servers.port('SQUID_PORT')}"
    with tern.Client(proxies={"http": proxy}) as c:
        assert "Via" in c.get(servers.nginx("/1k.bin")).headers
    with tern.Client(proxy=proxy, no_proxy="127.0.0.1") as c:
        assert "Via" not in c.get(servers.nginx("/1k.bin")).headers


# ---- NTLM (ntlmserver.py on pyspnego: NTLM_PORT, and a proxy on NTLM_PROXY_PORT) ----

def test_ntlm_origin_and_proxy(servers):
    user, password = servers.must("NTLM_USER"), servers.must("NTLM_PASSWORD")
    domain = servers.must("NTLM_DOMAIN")
    origin = f"http://127.0.0.1:{servers.port('NTLM_PORT')}/x"
    with tern.Client() as c:
        r = c.get(origin, auth=tern.NTLMAuth(user, password, domain=domain))
        assert r.status_code == 200 and f"user={domain}\\{user}" in r.text
        # The handshake stayed on one connection: NEGOTIATE and AUTHENTICATE on the same.
        fields = dict(kv.split("=", 1) for kv in r.text.split() if "=" in kv)
        assert fields["negotiate_conn"] == fields["authenticate_conn"] == fields["conn"]
        r = c.get(origin, auth=tern.AnyAuth(f"{domain}\\{user}", password))
        assert r.status_code == 200
        r = c.get(origin, auth=tern.NTLMAuth(user, "wrong", domain=domain))
        assert r.status_code == 401 and "NTLM authentication failed" in r.text
    proxy = f"http://127.0.0.1:{servers.port('NTLM_PROXY_PORT')}"
    with tern.Client(proxy=proxy, proxy_auth=(f"{domain}\\{user}", password)) as c:
        r = c.get(servers.nginx("/1k.bin"))
        assert r.status_code == 200 and sha(r.content) == servers.must("SHA_1K")
