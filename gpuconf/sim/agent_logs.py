"""Container output of the simulated nodes, and the kubelet's log endpoint serving it.

The node agents keep what each container printed in memory (:class:`LogStore`). Two ways out:

* in the same process as a :class:`gpuconf.sim.server.FakeApiServer`, the agents become its
  ``pods/log`` provider (``NodeAgents.serve_logs``);
* :class:`LogEndpoint`: plain HTTP on a loopback port answering the kubelet's
  ``GET /containerLogs/<namespace>/<pod>/<container>`` (``tailLines``, ``limitBytes``,
  ``previous``), the port every simulated Node advertises in
  ``status.daemonEndpoints.kubeletEndpoint.Port`` with InternalIP 127.0.0.1, so an API server in
  another process can proxy ``pods/log`` to it. It serves HTTPS with a self-signed certificate,
  as a kubelet does: a real kube-apiserver (which verifies kubelet certificates only when given
  ``--kubelet-certificate-authority``) reads these logs; tests/realk8s proves it with v1.36.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import tempfile
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpuconf.sim.server import LogUnavailable

__all__ = ["LogEndpoint", "LogLookup", "LogStore", "NoSuchContainer", "apply_limits"]

log = logging.getLogger(__name__)


class LogStore:
    """Output per pod (``namespace/name``, with its uid) and container."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: dict[str, tuple[str, dict[str, str]]] = {}

    def put(self, key: str, uid: str, container: str, text: str) -> None:
        with self._lock:
            known = self._texts.get(key)
            if known is None or known[0] != uid:
                known = (uid, {})
                self._texts[key] = known
            known[1][container] = text

    def get(self, key: str, container: str) -> tuple[str, str] | None:
        """(pod uid, text) of a container that has printed, or None."""
        with self._lock:
            known = self._texts.get(key)
            if known is None or container not in known[1]:
                return None
            return known[0], known[1][container]

    def forget(self, key: str) -> None:
        with self._lock:
            self._texts.pop(key, None)


class NoSuchContainer(Exception):
    """The endpoint's 404: no such pod or container on these nodes."""


#: (namespace, pod, container, previous) -> text; raises NoSuchContainer, or
#: gpuconf.sim.server.LogUnavailable for a container that has not started.
LogLookup = Callable[[str, str, str, bool], str]


def apply_limits(text: str, query: dict[str, str]) -> bytes:
    """``tailLines`` then ``limitBytes``, as the kubelet applies them."""
    tail = query.get("tailLines")
    if tail not in (None, "") and str(tail).lstrip("-").isdigit():
        lines = text.splitlines(keepends=True)
        text = "".join(lines[-int(str(tail)):]) if int(str(tail)) > 0 else ""
    data = text.encode()
    limit = query.get("limitBytes")
    if limit not in (None, "") and str(limit).isdigit() and int(str(limit)) > 0:
        data = data[:int(str(limit))]
    return data


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's naming
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        if parts == ["healthz"]:
            self._send(200, b"ok")
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._send(404, b"404 page not found\n")
            return
        _, namespace, pod, container = parts
        previous = query.get("previous", "").lower() in ("1", "true")
        try:
            text = self.server.lookup(namespace, pod, container, previous)
        except NoSuchContainer as e:
            self._send(404, str(e).encode())
            return
        except LogUnavailable as e:
            self._send(400, str(e).encode())
            return
        except Exception as e:  # a bug must reach the caller as a 500, not a hang
            log.exception("log endpoint failed on %s", self.path)
            self._send(500, str(e).encode())
            return
        self._send(200, apply_limits(text, query))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], lookup: LogLookup) -> None:
        self.lookup = lookup
        super().__init__(address, _Handler)


def _self_signed(host: str) -> tuple[bytes, bytes]:
    """A fresh EC P-256 certificate and key (PEM) for ``host``, valid for a year: what a kubelet
    with a self-signed serving certificate presents. The kube-apiserver does not verify kubelet
    certificates unless given --kubelet-certificate-authority."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpuconf-sim-kubelet@{host}")])
    now = datetime.datetime.now(datetime.UTC)
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


class LogEndpoint:
    """The agents' ``/containerLogs`` endpoint on ``host:port`` (0: a free port), over HTTPS with
    a self-signed certificate, as a kubelet serves it to the API server."""

    def __init__(self, lookup: LogLookup, *, host: str = "127.0.0.1", port: int = 0, name: str | None = None) -> None:
        self._server = _Server((host, port), lookup)
        cert, key = _self_signed(name or host)
        with tempfile.TemporaryDirectory() as tmp:
            cert_path, key_path = Path(tmp, "kubelet.crt"), Path(tmp, "kubelet.key")
            cert_path.write_bytes(cert)
            key_path.write_bytes(key)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_path, key_path)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.certificate = cert
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"gpuconf-sim-kubelet-logs-{self.port}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
