"""A throttling reverse proxy in front of the real kube-apiserver: an API storm on demand.

kube-apiserver's Priority and Fairness cannot be made to refuse every request of a kind for a whole
run (a priority level keeps at least one seat, so only overlapping requests are rejected; see the
README's tier section), so the tier's storm is made here: :class:`ThrottlingProxy` listens on
127.0.0.1 (plain HTTP, a free port), forwards every request to the apiserver over HTTPS with the
control plane's admin client certificate (as ``kubectl proxy`` authenticates with its own
credentials), streams each answer back as it arrives (watches, logs), and answers every request on a
chosen resource with the 429 that Priority and Fairness sends, for as long as it runs.

The 429 is the one kube-apiserver v1.36.2 sent when its APF rejected a request
(``tests/data/real/apf-429/``): not a ``kind: Status`` body but Go's ``http.Error`` text, with
``Retry-After``. Resources are spelled as ``gpuconf sim serve --throttle`` spells them: ``pods``
(any subresource too), ``pods/log``, ``resourceclaims.resource.k8s.io``.

Not forwarded: connection upgrades (exec, attach, port-forward), answered 501; the suites use none.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: kube-apiserver v1.36.2's APF rejection, as captured (tests/data/real/apf-429/response.json).
APF_REJECTION = json.loads((Path(__file__).parents[1] / "data" / "real" / "apf-429" / "response.json").read_text())
#: Headers that belong to one connection, not to the request or answer (RFC 9110 7.6.1).
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
#: The rejection's headers that belong to the one answer captured.
PER_ANSWER = {"audit-id", "date", "content-length"}


def resource_names(path: str) -> frozenset[str]:
    """The spellings of a request path's resource: ``/api/v1/namespaces/x/pods/p/log`` is ``pods``
    and ``pods/log``; ``/apis/resource.k8s.io/v1/resourceclaims`` also ``resourceclaims.resource.k8s.io``;
    none for a path outside the API (``/version``, discovery)."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return frozenset()
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]  # a namespaced resource; /namespaces/x alone is the namespace itself
    resource, subresource = rest[0], rest[2] if len(rest) >= 3 else ""
    names = {resource}
    if group:
        names.add(f"{resource}.{group}")
    if subresource:
        names.add(f"{resource}/{subresource}")
    return frozenset(names)


class ThrottlingProxy:
    """``with ThrottlingProxy(url, ca, cert, key, throttle={"pods"}) as proxy``: ``proxy.url`` is
    the plain-HTTP address to give the client; ``proxy.throttled`` counts the 429s sent and
    ``proxy.forwarded`` the requests passed on."""

    def __init__(self, upstream: str, ca: Path, cert: Path, key: Path, *, throttle: set[str] | frozenset[str],
                 retry_after: int = 1) -> None:
        split = urlsplit(upstream)
        self.host, self.port = str(split.hostname), int(split.port or 443)
        self.context = ssl.create_default_context(cafile=str(ca))
        self.context.load_cert_chain(str(cert), str(key))
        self.throttle = frozenset(throttle)
        self.retry_after = retry_after
        self.throttled = self.forwarded = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="throttling-proxy", daemon=True)

    def __enter__(self) -> ThrottlingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def _count(self, throttled: bool) -> None:
        with self._lock:
            if throttled:
                self.throttled += 1
            else:
                self.forwarded += 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def _reject(self) -> None:
                body = APF_REJECTION["body"].encode()
                self.send_response(APF_REJECTION["status"])
                for name, value in APF_REJECTION["headers"].items():
                    if name.lower() in PER_ANSWER:
                        continue
                    self.send_header(name, str(proxy.retry_after) if name == "Retry-After" else value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                if self.headers.get("Upgrade"):
                    self.send_error(501, "the throttling proxy does not forward connection upgrades")
                    return
                if proxy.throttle & resource_names(self.path):
                    proxy._count(throttled=True)
                    length = int(self.headers.get("Content-Length") or 0)
                    self.rfile.read(length)  # the request's body, so the connection stays usable
                    self._reject()
                    return
                proxy._count(throttled=False)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                upstream = http.client.HTTPSConnection(proxy.host, proxy.port, context=proxy.context, timeout=600)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in HOP_BY_HOP:
                            self.send_header(name, value)
                    sized = answer.getheader("Content-Length") is not None or self.command == "HEAD"
                    if not sized:
                        self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := answer.read1(65536):  # as it arrives: a watch's events, a log's lines
                        self.wfile.write(chunk if sized else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    if not sized:
                        self.wfile.write(b"0\r\n\r\n")
                except (OSError, http.client.HTTPException):
                    self.close_connection = True  # the client sees the connection end, as with the server itself
                finally:
                    upstream.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _forward

        return Handler
