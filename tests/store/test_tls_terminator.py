"""tools/tls_terminator.py: stunnel4 serves HTTPS that a client trusting the generated CA
verifies, for `localhost` and `127.0.0.1`, and forwards to the plain-HTTP backend; a client
that does not trust it refuses the handshake."""

from __future__ import annotations

import http.server
import shutil
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import QuietHandler, tool

from tools import tls_terminator
from tools.tls_terminator import Terminator, TerminatorError


class _Hello(QuietHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(b"plain HTTP saw " + body)


@pytest.fixture(scope="module")
def terminator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminator]:
    tool("stunnel4", "apt-get install stunnel4")
    backend = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    running = tls_terminator.start(
        f"http://127.0.0.1:{backend.server_address[1]}", tmp_path_factory.mktemp("tls")
    )
    yield running
    running.stop()
    backend.shutdown()


def _post(url: str, context: ssl.SSLContext) -> bytes:
    request = urllib.request.Request(url, data=b"hello", method="POST")
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return bytes(response.read())


def test_a_client_trusting_the_ca_bundle_reaches_the_backend(terminator: Terminator) -> None:
    assert terminator.endpoint.startswith("https://localhost:")
    trusting = ssl.create_default_context(cafile=str(terminator.ca_bundle))
    trusting.verify_flags |= ssl.VERIFY_X509_STRICT  # what Python 3.13's default adds
    assert _post(terminator.endpoint, trusting) == b"plain HTTP saw hello"
    by_address = terminator.endpoint.replace("localhost", "127.0.0.1")
    assert _post(by_address, trusting) == b"plain HTTP saw hello"


def test_a_client_without_the_ca_bundle_refuses_the_handshake(terminator: Terminator) -> None:
    port = int(terminator.endpoint.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"),
    ):
        ssl.create_default_context().wrap_socket(raw, server_hostname="localhost")


def test_a_host_the_certificate_does_not_name_is_refused(terminator: Terminator) -> None:
    port = int(terminator.endpoint.rsplit(":", 1)[1])
    trusting = ssl.create_default_context(cafile=str(terminator.ca_bundle))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        pytest.raises(ssl.SSLCertVerificationError, match="mismatch"),
    ):
        trusting.wrap_socket(raw, server_hostname="dynamodb.us-east-1.amazonaws.com")


def test_stop_closes_the_port(tmp_path: Path) -> None:
    tool("stunnel4", "apt-get install stunnel4")
    running = tls_terminator.start("http://127.0.0.1:9", tmp_path)
    port = int(running.endpoint.rsplit(":", 1)[1])
    running.stop()
    running.stop()  # idempotent
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=30).close()


def test_missing_stunnel_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_: None)
    with pytest.raises(TerminatorError, match="apt-get install stunnel4"):
        tls_terminator.start("http://127.0.0.1:8001", tmp_path)


def test_a_backend_that_is_not_plain_http_is_refused(tmp_path: Path) -> None:
    tool("stunnel4", "apt-get install stunnel4")
    with pytest.raises(TerminatorError, match="http://HOST:PORT"):
        tls_terminator.start("https://127.0.0.1:8001", tmp_path)
