#!/usr/bin/env python3
"""Test certificates for Tern's TLS tests, made with the `openssl` command (1.1.1 or 3.x).

    certs.py DIR      create (or reuse) the certificates in DIR and print their paths

servers.py calls ensure(DIR) at start-up. Everything is generated once and cached: DIR/certs.json
records the scheme version and when the set was made; the set is made again when a file is
missing, the scheme changed, or it is older than REGENERATE_AFTER_DAYS (well inside every
"valid" certificate's lifetime and before the "not yet valid" one starts being valid).

Files (EC P-256 keys, SHA-256 signatures; keys are unencrypted PEM unless noted):

    ca.pem, ca.key                 the test CA ("Tern Test CA"); trust this one (CA_PEM)
    server.pem, server.key         signed by the CA; SAN DNS:localhost, IP:127.0.0.1, IP:::1
    expired.pem, expired.key       signed by the CA, same SAN; notAfter one year ago
    notyet.pem, notyet.key         signed by the CA, same SAN; notBefore in ten years
    wronghost.pem, wronghost.key   signed by the CA; SAN DNS:wrong.example only
    selfsigned.pem, selfsigned.key self-signed (not from the CA); SAN like server.pem
    client.pem, client.key         client certificate (CN "tern-test-client", clientAuth)
    client-enc.key                 client.key encrypted (PKCS#8, AES-256) with PASSWORD
    cadir/HASH.0                   ca.pem in an OpenSSL hashed directory (CApath)

Validity dates other than "from now for N days" need `openssl ca -startdate/-enddate` (the
`x509 -not_before/-not_after` options only exist from OpenSSL 3.4), so every CA-signed
certificate is issued by `openssl ca` from a throw-away database in a temporary directory.
Stdlib only; Python 3.8+.
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SCHEME = 2  # bump when the set of files or their contents change
PASSWORD = "secret"
REGENERATE_AFTER_DAYS = 180
VALID_DAYS = 3650
NOTYET_AFTER_DAYS = 3650  # the not-yet-valid certificate starts this far in the future

SAN_GOOD = "DNS:localhost,IP:127.0.0.1,IP:::1"
SAN_WRONG = "DNS:wrong.example"

LEAVES = [  # (name, CN, SAN or None, usage, not_before offset days, not_after offset days)
    ("server", "localhost", SAN_GOOD, "serverAuth", -1, VALID_DAYS),
    ("expired", "localhost", SAN_GOOD, "serverAuth", -730, -365),
    ("notyet", "localhost", SAN_GOOD, "serverAuth", NOTYET_AFTER_DAYS, NOTYET_AFTER_DAYS + 365),
    ("wronghost", "wrong.example", SAN_WRONG, "serverAuth", -1, VALID_DAYS),
    ("client", "tern-test-client", None, "clientAuth", -1, VALID_DAYS),
]
FILES = (["ca.pem", "ca.key", "selfsigned.pem", "selfsigned.key", "client-enc.key"]
         + [n + ext for n, *_ in LEAVES for ext in (".pem", ".key")])

CA_CONF = """\
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = placeholder
[ v3_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ v3_self ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = {san_good}
subjectKeyIdentifier = hash
[ ca ]
default_ca = tern
[ tern ]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/new
serial = $dir/serial
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = none
email_in_dn = no
[ policy_any ]
commonName = supplied
"""

LEAF_EXT = """\
[ leaf ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = {usage}
authorityKeyIdentifier = keyid
subjectKeyIdentifier = hash
{san}
"""


class CertError(Exception):
    pass


def _run(argv, cwd):
    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise CertError("%s failed (exit %d):\n%s%s" % (
            " ".join(argv), p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace")))


def _openssl():
    exe = os.environ.get("TERN_OPENSSL") or shutil.which("openssl")
    if not exe:
        raise CertError("the `openssl` command is needed to make the TLS test certificates "
                        "(Debian/Ubuntu: apt-get install openssl)")
    return exe


def _asn1_time(days_from_now):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days_from_now)
    # UTCTime up to 2049, GeneralizedTime after (RFC 5280); openssl ca takes both forms.
    if t.year < 2050:
        return t.strftime("%y%m%d%H%M%SZ")
    return t.strftime("%Y%m%d%H%M%SZ")


def _newkey(openssl, path, cwd):
    _run([openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
          "-out", path], cwd)


def generate(out_dir):
    openssl = _openssl()
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tern-certs-") as work:
        os.makedirs(os.path.join(work, "new"))
        with open(os.path.join(work, "index.txt"), "w"):
            pass
        with open(os.path.join(work, "serial"), "w") as f:
            f.write("%016X\n" % (int(time.time() * 1000) & 0xFFFFFFFFFFFF))
        conf = os.path.join(work, "openssl.cnf")
        with open(conf, "w") as f:
            f.write(CA_CONF.format(dir=work, san_good=SAN_GOOD))

        def w(name):
            return os.path.join(work, name)

        # The CA.
        _newkey(openssl, w("ca.key"), work)
        _run([openssl, "req", "-config", conf, "-new", "-x509", "-key", w("ca.key"),
              "-subj", "/CN=Tern Test CA", "-days", str(VALID_DAYS + 400), "-sha256",
              "-extensions", "v3_ca", "-out", w("ca.pem")], work)

        # A self-signed server certificate with the right names but no trusted issuer.
        _newkey(openssl, w("selfsigned.key"), work)
        _run([openssl, "req", "-config", conf, "-new", "-x509", "-key", w("selfsigned.key"),
              "-subj", "/CN=localhost", "-days", str(VALID_DAYS), "-sha256",
              "-extensions", "v3_self", "-out", w("selfsigned.pem")], work)

        # Leaves issued by the CA, with explicit validity windows.
        for name, cn, san, usage, nb, na in LEAVES:
            _newkey(openssl, w(name + ".key"), work)
            _run([openssl, "req", "-config", conf, "-new", "-key", w(name + ".key"),
                  "-subj", "/CN=" + cn, "-out", w(name + ".csr")], work)
            ext = w(name + ".ext")
            with open(ext, "w") as f:
                f.write(LEAF_EXT.format(usage=usage,
                                        san="subjectAltName = " + san if san else ""))
            _run([openssl, "ca", "-config", conf, "-batch", "-notext", "-md", "sha256",
                  "-cert", w("ca.pem"), "-keyfile", w("ca.key"),
                  "-startdate", _asn1_time(nb), "-enddate", _asn1_time(na),
                  "-extfile", ext, "-extensions", "leaf",
                  "-in", w(name + ".csr"), "-out", w(name + ".pem")], work)

        _run([openssl, "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", w("client.key"),
              "-passout", "pass:" + PASSWORD, "-out", w("client-enc.key")], work)

        p = subprocess.run([openssl, "x509", "-noout", "-hash", "-in", w("ca.pem")], cwd=work,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        ca_hash = p.stdout.decode("ascii", "replace").strip()
        if p.returncode != 0 or not ca_hash:
            raise CertError("openssl x509 -hash failed: %s" % p.stderr.decode("utf-8", "replace"))
        cadir = os.path.join(out_dir, "cadir")
        shutil.rmtree(cadir, ignore_errors=True)
        os.makedirs(cadir)
        shutil.copyfile(w("ca.pem"), os.path.join(cadir, ca_hash + ".0"))

        for name in FILES:
            tmp = os.path.join(out_dir, name + ".tmp")
            shutil.copyfile(w(name), tmp)
            os.chmod(tmp, 0o600 if name.endswith(".key") else 0o644)
            os.replace(tmp, os.path.join(out_dir, name))
    meta = {"scheme": SCHEME, "created": time.time(), "password": PASSWORD}
    tmp = os.path.join(out_dir, "certs.json.tmp")
    with open(tmp, "w") as f:
        json.dump(meta, f)
    os.replace(tmp, os.path.join(out_dir, "certs.json"))  # written last: marks a complete set


def _cached(out_dir):
    try:
        with open(os.path.join(out_dir, "certs.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    if meta.get("scheme") != SCHEME or meta.get("password") != PASSWORD:
        return False
    age_days = (time.time() - float(meta.get("created", 0))) / 86400
    if not 0 <= age_days < REGENERATE_AFTER_DAYS:
        return False
    return (all(os.path.isfile(os.path.join(out_dir, n)) for n in FILES)
            and any(n.endswith(".0") for n in _listdir(os.path.join(out_dir, "cadir"))))


def _listdir(d):
    try:
        return os.listdir(d)
    except OSError:
        return []


def ensure(out_dir):
    """Makes sure out_dir holds a complete, current set; returns {name: absolute path} plus
    "password". Raises CertError (with openssl's output) when generation fails."""
    out_dir = os.path.abspath(out_dir)
    if not _cached(out_dir):
        try:
            os.unlink(os.path.join(out_dir, "certs.json"))
        except OSError:
            pass
        generate(out_dir)
    paths = {n: os.path.join(out_dir, n) for n in FILES}
    paths["cadir"] = os.path.join(out_dir, "cadir")
    paths["password"] = PASSWORD
    return paths


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: %s DIR\n" % os.path.basename(argv[0]))
        return 2
    try:
        paths = ensure(argv[1])
    except CertError as e:
        sys.stderr.write("certs.py: error: %s\n" % e)
        return 1
    for k in sorted(paths):
        sys.stdout.write("%s %s\n" % (k, paths[k]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
