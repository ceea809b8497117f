"""HTTPS in front of a plain-HTTP DynamoDB (DynamoDB Local), as AWS's endpoints are reached.

Debian's `stunnel4` terminates TLS on a free loopback port and forwards each connection to
`backend`; the certificate it serves is made here (a throwaway CA and a server certificate
for `localhost` and `127.0.0.1`), and `ca_bundle` is the CA's PEM, for `AWS_CA_BUNDLE`:

    terminator = start("http://127.0.0.1:8001", Path("/tmp/tls"))
    # AWS_ENDPOINT_URL_DYNAMODB=terminator.endpoint AWS_CA_BUNDLE=terminator.ca_bundle
    terminator.stop()
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tools import processes
from tools.processes import free_port

STUNNEL = "stunnel4"
INSTALL_HINT = "apt-get install stunnel4"


class TerminatorError(RuntimeError):
    """stunnel4 is missing, or did not start."""


@dataclass
class Terminator:
    endpoint: str  # "https://localhost:PORT"
    ca_bundle: Path  # PEM of the CA that signed the served certificate, for AWS_CA_BUNDLE
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """End stunnel (SIGTERM, then SIGKILL after 10 s); idempotent."""
        processes.stop(self.process)


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA's certificate (PEM): what a client trusts
    cert: Path  # the server's certificate (PEM), signed by the CA
    key: Path  # the server's private key (PEM)


def make_certificates(workdir: Path) -> Certificates:
    """A throwaway CA and a server certificate it signed, for DNS:localhost and
    IP:127.0.0.1, written under `workdir`. A separate CA (rather than one self-signed
    server certificate) is what strict verifiers (OpenSSL's X509_STRICT) accept as a trust
    anchor."""
    workdir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=7)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "graph-api test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    made = Certificates(workdir / "ca.pem", workdir / "server.pem", workdir / "server.key")
    made.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    made.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    made.key.touch(mode=0o600)
    made.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return made


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def config(accept_port: int, backend: str, certificates: Certificates) -> str:
    """stunnel's configuration: TLS on 127.0.0.1:`accept_port`, forwarded to `backend`."""
    parts = urlsplit(backend)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise TerminatorError(f"backend must be http://HOST:PORT, not {backend!r}")
    return "\n".join(
        [
            "foreground = yes",
            "pid =",  # empty: no pid file (we hold the process)
            "syslog = no",  # foreground: the log goes to stderr, which start() sends to a file
            "debug = 4",  # warnings and errors, not a line per connection
            # Nagle's algorithm on either side would hold a request's or an answer's last
            # segment for the peer's delayed ACK (~40 ms), which DynamoDB's endpoints do not.
            "socket = l:TCP_NODELAY=1",
            "socket = r:TCP_NODELAY=1",
            "[dynamodb]",
            f"accept = 127.0.0.1:{accept_port}",
            f"connect = {parts.hostname}:{parts.port}",
            f"cert = {certificates.cert}",
            f"key = {certificates.key}",
            "",
        ]
    )


def start(backend: str, workdir: Path, timeout: float = 30.0) -> Terminator:
    """stunnel4 serving HTTPS on a free loopback port in front of `backend`
    ("http://127.0.0.1:8001"), its certificates, configuration and log under `workdir`;
    returns once the port accepts connections."""
    executable = shutil.which(STUNNEL) or shutil.which(f"/usr/bin/{STUNNEL}")
    if executable is None:
        raise TerminatorError(f"{STUNNEL} is needed for the TLS terminator: {INSTALL_HINT}")
    workdir = workdir.resolve()
    certificates = make_certificates(workdir)
    log = workdir / "stunnel.log"
    for _ in range(3):  # the free port may be taken between our probe and stunnel's bind
        port = free_port()
        conf = workdir / "stunnel.conf"
        conf.write_text(config(port, backend, certificates))
        with log.open("wb") as log_file:  # the child keeps its own descriptor
            process = subprocess.Popen(
                [executable, str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        terminator = Terminator(f"https://localhost:{port}", certificates.ca, process, log)
        if _wait_accepting(process, port, timeout):
            return terminator
        if process.poll() is None:  # alive, yet not accepting in time
            terminator.stop()
            raise TerminatorError(f"{STUNNEL} did not accept on port {port} in {timeout:.0f} s")
    logged = log.read_text(errors="replace")[-2000:]
    raise TerminatorError(f"{STUNNEL} exited ({process.returncode}): {logged}")


def _wait_accepting(process: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """True once 127.0.0.1:`port` accepts; False if the process exits first or `timeout`
    passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False
