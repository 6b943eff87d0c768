"""The servers the tests talk to: the same nginx, faultserver.py, Apache, lighttpd and squid as
the C and Swift tests (Tests/TestServer/servers.py).

With TERN_TEST_STATE set (scripts/test.sh), its env file names running servers; otherwise the
session starts them into a temporary directory and stops them at the end. A server that cannot
be found or started fails the tests, loudly; nothing is skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "Tests" / "TestServer" / "servers.py"


class Servers:
    """Ports and fixture facts from the servers' env file."""

    def __init__(self, state: str) -> None:
        self.state = state
        env_file = Path(state) / "env"
        if not env_file.exists():
            raise RuntimeError(f"the test servers' env file {env_file} is missing")
        self.env: Dict[str, str] = {}
        for line in env_file.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                self.env[key] = value
        self.www = Path(self.must("WWW"))

    def must(self, key: str) -> str:
        value = self.env.get(key)
        if not value:
            raise RuntimeError(f"the test servers' env lacks {key}")
        return value

    def port(self, key: str) -> int:
        return int(self.must(key))

    def nginx(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port('NGINX_PORT')}{path}"

    def fault(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port('FAULT_PORT')}{path}"

    def https(self, key: str, path: str) -> str:
        return f"https://127.0.0.1:{self.port(key)}{path}"


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    state = os.environ.get("TERN_TEST_STATE")
    if state:
        yield Servers(state)
        return
    work = tempfile.mkdtemp(prefix="tern-python-tests-")
    os.chmod(work, 0o755)  # Apache and squid (as www-data/proxy when root) read below it
    state = os.path.join(work, "state")
    started = subprocess.run([sys.executable, str(SERVERS), "start", state],
                             capture_output=True, text=True)
    if started.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(f"servers.py start failed:\n{started.stdout}\n{started.stderr}")
    try:
        yield Servers(state)
    finally:
        subprocess.run([sys.executable, str(SERVERS), "stop", state], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture()
def client() -> Iterator["object"]:
    import tern

    with tern.Client() as c:
        yield c


def live_requests_settle(timeout: float = 2.0) -> int:
    """The engine's count of live request objects, once it reaches 0 (or after ``timeout``).

    The engine drops its own reference just after a complete callback returns, so right after
    a request completes its object may still be counted for a moment.
    """
    import time

    import tern

    deadline = time.monotonic() + timeout
    while tern._requests_live() and time.monotonic() < deadline:
        time.sleep(0.01)
    return tern._requests_live()
