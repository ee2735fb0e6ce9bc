"""Certificate checks of `envloop.Client`: https servers are verified; a plain-http client, which
skips loading the trusted roots, trusts no certificate at all rather than every one."""

import datetime
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from envloop.client import Client
from envloop.errors import NotFoundError, ServerError


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class _Answers(http.server.BaseHTTPRequestHandler):
    """Answers every GET like a server that knows no job, so a connection that gets through shows."""

    def do_GET(self) -> None:
        body = b'{"detail": "no job named x"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the client's answer, not the server's log."""


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    cert, key = _self_signed(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_server_with_an_untrusted_certificate_is_refused(tls_server: tuple[str, Path]) -> None:
    url, _ = tls_server
    with Client(url, api_key="k") as client, pytest.raises(ServerError, match="cannot reach the"):
        client.get_job("x")


def test_the_same_server_is_reached_once_its_certificate_is_trusted(
    tls_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal above is the certificate's, not a broken TLS set-up: trusting it gets through."""
    url, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with Client(url, api_key="k") as client, pytest.raises(NotFoundError, match="no job named x"):
        client.get_job("x")


def test_a_plain_http_client_trusts_no_certificate(
    tls_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An http client never loads the roots; were it ever to speak TLS, it must fail closed, even to
    a certificate the environment says to trust (the https client above reaches this server then)."""
    url, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    http_url = url.replace("https://", "http://")
    with Client(http_url, api_key="k") as client, pytest.raises(ServerError, match="cannot reach"):
        client._send("GET", f"{url}/v1/jobs/x")
