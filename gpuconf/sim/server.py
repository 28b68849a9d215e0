"""A fake Kubernetes API server: real HTTP on loopback, speaking the REST API the official client uses.

:class:`FakeApiServer` serves discovery (``/version``, ``/api``, ``/apis``, resource lists), every
verb on the resources of :mod:`gpuconf.sim.resources` (CRUD, list with selectors and pagination,
watch as chunked newline-delimited JSON, the three patch types, ``/status``, ``pods/log``,
``pods/binding``), ``kind: Status`` errors worded like the real server's, and the API faults of
:mod:`gpuconf.sim.faults`. Semantics live in :class:`gpuconf.sim.store.Store`; this module is HTTP.

Usage::

    with FakeApiServer() as server:
        server.write_kubeconfig(tmp / "kubeconfig")
        configuration = kubernetes.client.Configuration(host=server.url)

Controllers in the same process use ``server.store`` (see the store's docstring), feed pod logs
through ``server.logs`` or :meth:`FakeApiServer.set_log_provider`, and decide graceful pod deletion
with ``server.store.set_pod_termination_hook``.

Why stdlib ``ThreadingHTTPServer``: one thread per connection is plenty for a test cluster, and the
two traps that make it slow or flaky are handled here: ``TCP_NODELAY`` (without it, Nagle plus
delayed ACK costs ~40 ms per request) and a listen backlog large enough for 50 clients connecting
at once (the default of 5 resets connections).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import select
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from gpuconf.sim.faults import Fault, FaultMode, FaultPlan, RequestInfo
from gpuconf.sim.printers import NODE_COLUMNS, node_cells
from gpuconf.sim.resources import ResourceType
from gpuconf.sim.store import ApiError, Store, Watcher, WatcherClosed

__all__ = ["VERSION_INFO", "FakeApiServer", "LogBook", "LogProvider", "LogRequest", "LogUnavailable",
           "ProxyProvider", "RequestObserver"]

log = logging.getLogger(__name__)

#: What ``/version`` answers: every field the v37 client's VersionInfo requires, and more.
VERSION_INFO: Mapping[str, str] = {
    "major": "1", "minor": "34", "emulationMajor": "1", "emulationMinor": "34",
    "minCompatibilityMajor": "1", "minCompatibilityMinor": "33",
    "gitVersion": "v1.34.0", "gitCommit": "gpuconf-sim", "gitTreeState": "clean",
    "buildDate": "2025-08-27T00:00:00Z", "goVersion": "go1.24.6", "compiler": "gc", "platform": "linux/amd64",
}

_NOT_FOUND = "the server could not find the requested resource"
_JSON = "application/json"


# ---------------------------------------------------------------------------------------------------
# Pod logs


@dataclass(frozen=True)
class LogRequest:
    """A ``pods/log`` read, after the container has been resolved and checked against the pod."""

    namespace: str
    pod_name: str
    container: str
    previous: bool
    pod: Mapping[str, Any]


class LogUnavailable(Exception):
    """No log to give (container not started, no previous instance); the message is the 400 answer."""


#: Produces the full log text of one container; the server applies tailLines and limitBytes.
LogProvider = Callable[[LogRequest], str]

#: Answers ``GET pods/{name}[:{port}]/proxy[/{path}]`` for a pod: ``(pod, port, path)`` to
#: ``(status, content type, body)``, or None when nothing listens there (the server then answers as
#: a real one does when it cannot reach the pod: 503, "error trying to reach service: ...").
ProxyProvider = Callable[[Mapping[str, Any], str, str], "tuple[int, str, bytes] | None"]

#: Told of every request once it is routed, before faults and handling: what it asks (verb,
#: group, resource, subresource, namespace, name; resource "" for discovery and unrouted paths)
#: and the client's User-Agent header ("" when absent).
RequestObserver = Callable[[RequestInfo, str], None]


class LogBook:
    """The default log provider: texts a node agent (or a test) has recorded per container."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: dict[tuple[str, str, str, bool], str] = {}

    def set(self, namespace: str, pod: str, container: str, text: str, *, previous: bool = False) -> None:
        with self._lock:
            self._texts[(namespace, pod, container, previous)] = text

    def append(self, namespace: str, pod: str, container: str, text: str) -> None:
        with self._lock:
            key = (namespace, pod, container, False)
            self._texts[key] = self._texts.get(key, "") + text

    def forget(self, namespace: str, pod: str) -> None:
        with self._lock:
            for key in [k for k in self._texts if k[:2] == (namespace, pod)]:
                del self._texts[key]

    def recorded(self, request: LogRequest) -> str | None:
        key = (request.namespace, request.pod_name, request.container, request.previous)
        with self._lock:
            return self._texts.get(key)

    def __call__(self, request: LogRequest) -> str:
        text = self.recorded(request)
        if text is not None:
            return text
        if request.previous:
            raise LogUnavailable(f'previous terminated container "{request.container}" in pod '
                                 f'"{request.pod_name}" not found')
        if (request.pod.get("status") or {}).get("phase", "Pending") == "Pending":
            raise LogUnavailable(f'container "{request.container}" in pod "{request.pod_name}" is waiting to start: '
                                 "ContainerCreating")
        return ""


def _fetch_kubelet_log(endpoint: str, request: LogRequest) -> str:
    query = urllib.parse.urlencode({"previous": "true"} if request.previous else {})
    path = "/".join(urllib.parse.quote(p, safe="") for p in (request.namespace, request.pod_name, request.container))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    url = f"{endpoint}/containerLogs/{path}" + (f"?{query}" if query else "")
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as response:  # noqa: S310 - our own URL
            return bytes(response.read()).decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        raise LogUnavailable(e.read().decode("utf-8", "replace").strip() or f"kubelet answered {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise LogUnavailable(f"Get \"{url}\": {reason}") from None


# ---------------------------------------------------------------------------------------------------
# Routing


@dataclass(frozen=True)
class _Route:
    """A routed request: either a discovery document or a resource operation."""

    info: RequestInfo
    document: Callable[[], Any] | None = None  # discovery: produce the body
    text: str | None = None  # health endpoints
    rt: ResourceType | None = None
    proxy: tuple[str, str] | None = None  # pods/proxy: (port, path)


def _flag(query: Mapping[str, str], key: str) -> bool:
    return query.get(key, "").lower() in ("true", "1")


def _int(query: Mapping[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw in (None, ""):
        return None
    try:
        return int(str(raw))
    except ValueError:
        raise ApiError.bad_request(f"invalid value for {key}: {raw!r}") from None


def _method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                    details={})


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", _NOT_FOUND, details={})


# ---------------------------------------------------------------------------------------------------
# HTTP


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], api: FakeApiServer) -> None:
        self.api = api
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that reset its connection (after an injected drop or cut, or a killed client)
        is no error of the server's: no traceback for it; anything else as before."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpuconf-sim"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass  # no access log: tests and benchmarks would drown in it

    def setup(self) -> None:
        super().setup()
        self.server.api._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.api._track(self.connection, False)

    def do_GET(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    # Plumbing ------------------------------------------------------------------------------------

    def parse_request(self) -> bool:
        """Parse the request line and headers without the stdlib's email parser.

        ``http.client.parse_headers`` builds an ``email.message.Message`` per request, which was a
        third of the server's time per request; API requests need only a few plain headers.
        """
        self.command = None  # type: ignore[assignment]  # the base class's convention until parsed
        self.request_version = version = self.default_request_version
        self.close_connection = True
        raw_line: bytes = getattr(self, "raw_requestline", b"")  # set by handle_one_request
        self.requestline = line = str(raw_line, "iso-8859-1").rstrip("\r\n")
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request line ({line!r})")
            return False
        self.command, self.path, self.request_version = parts
        version = parts[2]
        fields: dict[str, str] = {}
        for _ in range(128):
            raw = self.rfile.readline(65537)
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = raw.decode("iso-8859-1").partition(":")
            if sep:
                fields[name.strip().lower()] = value.strip()
        else:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
            return False
        self._fields = fields
        connection = fields.get("connection", "").lower()
        self.close_connection = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        if fields.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def _header(self, name: str) -> str:
        """A request header by lower-case name ("" when absent)."""
        return self._fields.get(name, "")

    def _read_body(self) -> bytes:
        if self._header("transfer-encoding").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self._header("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, code: int, body: bytes, content_type: str = _JSON,
              headers: Mapping[str, str] | None = None) -> None:
        # Status line, headers and body in one write: with TCP_NODELAY, separate small writes
        # would each become a packet.
        lines = [f"HTTP/1.1 {code} {HTTPStatus(code).phrase}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(body)}", "Cache-Control: no-cache, private"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if self.close_connection:
            lines.append("Connection: close")
        try:
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        except OSError:
            self.close_connection = True

    def _send_json(self, code: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(code, json.dumps(obj, separators=(",", ":")).encode(), _JSON, headers)

    def _send_error(self, error: ApiError) -> None:
        self._send_json(error.code, error.status(), error.headers)

    def _drop(self) -> None:
        """Close the connection without a response, as a crashing server or a load balancer would."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except (OSError, ValueError):
            return True

    # Request handling ----------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        api = self.server.api
        api._count()
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        body = self._read_body()
        route: _Route | None = None
        routing_error: ApiError | None = None
        try:
            route = api._route(method, url.path, query)
        except ApiError as e:
            routing_error = e
        info = route.info if route else RequestInfo(verb=method.lower(), path=url.path)
        user_agent = self._header("user-agent")
        for observe in api.request_observers:
            observe(info, user_agent)
        fault = api.faults.decide(dataclasses.replace(info, user_agent=user_agent))
        if fault is not None and fault.mode is not FaultMode.CUT_WATCH:
            self._inject(fault)
            return
        if routing_error is not None:
            self._send_error(routing_error)
            return
        assert route is not None
        try:
            if route.text is not None:
                self._send(200, route.text.encode(), "text/plain; charset=utf-8")
            elif route.document is not None:
                self._send_json(200, route.document())
            else:
                self._operate(route, query, body, fault)
        except ApiError as e:
            self._send_error(e)
        except Exception as e:  # a bug in the fake must reach the client as a 500, not a hang
            log.exception("fake API server failed on %s %s", method, self.path)
            self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {e}",
                                      details={"causes": [{"message": str(e)}]}))

    def _inject(self, fault: Fault) -> None:
        if fault.mode is FaultMode.DROP:
            self._drop()
        elif fault.mode is FaultMode.THROTTLE:  # as Priority and Fairness rejects (tests/data/real/apf-429/)
            self._send(429, b"Too many requests, please try again later.\n", "text/plain; charset=utf-8",
                       {"Retry-After": str(fault.retry_after), "X-Content-Type-Options": "nosniff"})
        else:
            self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {fault.message}",
                                      details={"causes": [{"message": fault.message}]}))

    def _json_body(self, body: bytes) -> Any:
        if not body:
            raise ApiError.bad_request("the request body is empty")
        try:
            return json.loads(body)
        except ValueError as e:
            raise ApiError.bad_request(f"couldn't get version/kind; json parse error: {e}") from None

    def _operate(self, route: _Route, query: Mapping[str, str], body: bytes, fault: Fault | None) -> None:
        api, info, rt = self.server.api, route.info, route.rt
        assert rt is not None
        store = api.store
        ns = info.namespace or None
        sub = info.subresource or None
        dry_run = query.get("dryRun") == "All"
        verb = info.verb
        if verb == "get" and sub == "log":
            self._serve_log(route, query)
        elif verb == "get" and sub == "proxy":
            self._serve_proxy(route)
        elif verb == "get":
            got = store.get(rt, info.name, namespace=ns, copy=False)
            as_table = "as=Table" in self._header("accept") and not sub
            self._send_json(200, _table(rt, [got], {"resourceVersion": got["metadata"].get("resourceVersion", "")})
                            if as_table else got)
        elif verb == "list":
            self._serve_list(rt, ns, query)
        elif verb == "watch":
            if info.name:  # GET .../pods/x?watch=true: a watch narrowed to one name
                by_name = f"metadata.name={info.name}"
                selector = query.get("fieldSelector")
                query = {**query, "fieldSelector": f"{selector},{by_name}" if selector else by_name}
            self._serve_watch(rt, ns, query, fault)
        elif verb == "create" and sub == "binding":
            target = (self._json_body(body).get("target") or {}).get("name")
            if not target:
                raise ApiError.invalid(rt, info.name, [])
            store.bind_pod(info.namespace, info.name, str(target), copy=False)
            self._send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "code": 201})
        elif verb == "create":
            self._send_json(201, store.create(rt, self._json_body(body), namespace=ns, dry_run=dry_run, copy=False))
        elif verb == "update":
            self._send_json(200, store.update(rt, self._json_body(body), namespace=ns, name=info.name,
                                              subresource=sub, dry_run=dry_run, copy=False))
        elif verb == "patch":
            content_type = self._header("content-type")
            self._send_json(200, store.patch(rt, info.name, self._json_body(body), namespace=ns,
                                             patch_type=content_type, subresource=sub, dry_run=dry_run, copy=False))
        elif verb == "delete":
            self._serve_delete(rt, info, query, body, dry_run)
        elif verb == "deletecollection":
            items = store.delete_collection(rt, namespace=ns, label_selector=query.get("labelSelector"),
                                            field_selector=query.get("fieldSelector"),
                                            grace_period_seconds=_int(query, "gracePeriodSeconds"), dry_run=dry_run,
                                            copy=False)
            self._send_json(200, {"kind": rt.list_kind, "apiVersion": rt.api_version,
                                  "metadata": {"resourceVersion": store.resource_version}, "items": items})
        else:
            raise _method_not_allowed()

    def _serve_list(self, rt: ResourceType, ns: str | None, query: Mapping[str, str]) -> None:
        result = self.server.api.store.list(
            rt, namespace=ns, label_selector=query.get("labelSelector"), field_selector=query.get("fieldSelector"),
            limit=_int(query, "limit"), continue_token=query.get("continue"), copy=False)
        meta: dict[str, Any] = {"resourceVersion": result.resource_version}
        if result.continue_token:
            meta["continue"] = result.continue_token
            meta["remainingItemCount"] = result.remaining
        if "as=Table" in self._header("accept"):
            self._send_json(200, _table(rt, result.items, meta))
            return
        self._send_json(200, {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta,
                              "items": result.items})

    def _serve_delete(self, rt: ResourceType, info: RequestInfo, query: Mapping[str, str], body: bytes,
                      dry_run: bool) -> None:
        options: dict[str, Any] = {}
        if body.strip():
            parsed = self._json_body(body)
            options = parsed if isinstance(parsed, dict) else {}
        grace = _int(query, "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        result = self.server.api.store.delete(rt, info.name, namespace=info.namespace or None,
                                              grace_period_seconds=grace, preconditions=options.get("preconditions"),
                                              dry_run=dry_run, copy=False)
        if not result.deleted or rt.returns_deleted_object:
            self._send_json(200, result.object)
            return
        details: dict[str, Any] = {"name": info.name}
        if rt.group:
            details["group"] = rt.group
        details.update(kind=rt.plural, uid=result.object["metadata"].get("uid"))
        self._send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": details})

    def _serve_proxy(self, route: _Route) -> None:
        api, info = self.server.api, route.info
        assert route.proxy is not None
        port, path = route.proxy
        pod = api.store.get("pods", info.name, namespace=info.namespace, copy=False)
        answer = api.proxy_provider(pod, port, path)
        if answer is None:
            # What kube-apiserver's proxy answers when the dial fails (apimachinery's
            # proxy transport: "error trying to reach service: %w").
            ip = (pod.get("status") or {}).get("podIP") or ""
            target = f"{ip}:{port or 80}"
            raise ApiError(503, "ServiceUnavailable",
                           f"error trying to reach service: dial tcp {target}: connect: connection refused", details={})
        code, content_type, body = answer
        self._send(code, body, content_type)

    def _serve_log(self, route: _Route, query: Mapping[str, str]) -> None:
        api, info = self.server.api, route.info
        pod = api.store.get("pods", info.name, namespace=info.namespace, copy=False)
        spec = pod.get("spec") or {}
        containers = [str(c.get("name")) for c in spec.get("containers") or []]
        init = [str(c.get("name")) for c in spec.get("initContainers") or []]
        ephemeral = [str(c.get("name")) for c in spec.get("ephemeralContainers") or []]
        container = query.get("container") or ""
        if not container:
            if len(containers) != 1:
                message = (f"a container name must be specified for pod {info.name}, "
                           f"choose one of: [{' '.join(containers)}]")
                if init:
                    message += f" or one of the init containers: [{' '.join(init)}]"
                raise ApiError.bad_request(message)
            container = containers[0]
        elif container not in containers + init + ephemeral:
            raise ApiError.bad_request(f"container {container} is not valid for pod {info.name}")
        request = LogRequest(info.namespace, info.name, container, _flag(query, "previous"), pod)
        try:
            text = api.log_provider(request)
        except LogUnavailable as e:
            raise ApiError.bad_request(str(e)) from None
        tail = _int(query, "tailLines")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail:]) if tail > 0 else ""
        data = text.encode()
        limit = _int(query, "limitBytes")
        if limit is not None and limit > 0:
            data = data[:limit]
        self._send(200, data, "text/plain")

    # Watch ---------------------------------------------------------------------------------------

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _serve_watch(self, rt: ResourceType, ns: str | None, query: Mapping[str, str], fault: Fault | None) -> None:
        api = self.server.api
        try:
            watcher = api.store.watch(rt, namespace=ns, resource_version=query.get("resourceVersion"),
                                      label_selector=query.get("labelSelector"),
                                      field_selector=query.get("fieldSelector"))
        except ApiError as e:
            if e.code != 410:
                raise
            # A too-old resourceVersion is not an HTTP error: the stream opens and carries one
            # ERROR event with the 410 Status, which is what clients (and Watch.stream) expect.
            self._start_stream()
            self._stream_line({"type": "ERROR", "object": e.status()})
            self._end_stream()
            return
        timeout = _int(query, "timeoutSeconds")
        deadline = time.monotonic() + (timeout if timeout is not None and timeout > 0 else api.watch_timeout)
        bookmarks = _flag(query, "allowWatchBookmarks")
        with watcher:
            self._start_stream()
            if not self._pump(watcher, rt, deadline, bookmarks, fault):
                return  # abrupt cut or client gone: no final chunk
        self._end_stream()

    def _start_stream(self) -> None:
        head = ["HTTP/1.1 200 OK", f"Content-Type: {_JSON}", "Transfer-Encoding: chunked",
                "Cache-Control: no-cache, private"]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))

    def _stream_line(self, event: Mapping[str, Any]) -> None:
        self._write_chunk(json.dumps(event, separators=(",", ":")).encode() + b"\n")

    def _end_stream(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _pump(self, watcher: Watcher, rt: ResourceType, deadline: float, bookmarks: bool,
              fault: Fault | None) -> bool:
        """Stream events until the deadline; False when the connection must not be reused."""
        api = self.server.api
        cut_after = fault.after_events if fault is not None else None
        sent = 0
        last_bookmark = time.monotonic()
        try:
            while True:
                if cut_after is not None and sent >= cut_after:
                    if fault is not None and fault.abrupt:
                        self._drop()
                        return False
                    return True
                now = time.monotonic()
                if now >= deadline:
                    return True
                wait = min(deadline - now, 1.0)
                if bookmarks:
                    wait = max(0.0, min(wait, last_bookmark + api.bookmark_interval - now))
                try:
                    event = watcher.next(timeout=wait)
                except WatcherClosed:
                    return True
                if event is not None:
                    self._stream_line({"type": event.type, "object": event.object})
                    sent += 1
                    continue
                if self._client_gone():
                    self.close_connection = True
                    return False
                if bookmarks and time.monotonic() >= last_bookmark + api.bookmark_interval:
                    rv = api.store.bookmark(watcher)
                    if rv is not None:
                        self._stream_line({"type": "BOOKMARK", "object": {
                            "kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": rv}}})
                    last_bookmark = time.monotonic()
        except OSError:
            self.close_connection = True
            return False


def _nothing_listens(pod: Mapping[str, Any], port: str, path: str) -> tuple[int, str, bytes] | None:
    return None


def _openapi_group_versions(table: Any) -> list[str]:
    return [f"apis/{g}/{v}" if g else f"api/{v}" for g, versions in table.group_versions().items() for v in versions]


def _openapi_document(table: Any, gv: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for rt in table.types:
        if (f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}") != gv:
            continue
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        patch = {
            "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "parameters": [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                           for name in ("dryRun", "fieldManager", "fieldValidation")],
        }
        paths[f"/{gv}{scope}/{rt.plural}/{{name}}"] = {"patch": patch}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
            "paths": paths}


def _table(rt: ResourceType, items: list[dict[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The server-side table kubectl asks for in ``kubectl get``: the Node printer's for nodes, else
    the default one (Name, Created At)."""
    columns = [
        {"name": "Name", "type": "string", "format": "name", "priority": 0,
         "description": "Name must be unique within a namespace."},
        {"name": "Created At", "type": "date", "format": "", "priority": 0,
         "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
    ]
    nodes = rt.kind == "Node" and rt.group == ""
    if nodes:
        columns = NODE_COLUMNS
    rows = [{"cells": node_cells(o) if nodes else [o["metadata"]["name"], o["metadata"].get("creationTimestamp")],
             "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}}
            for o in items]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(meta), "columnDefinitions": columns,
            "rows": rows}


# ---------------------------------------------------------------------------------------------------
# The server


class FakeApiServer:
    """A fake API server on ``host:port`` (port 0 picks a free one), backed by ``store``.

    ``bookmark_interval`` is how often a watch with allowWatchBookmarks gets a BOOKMARK (the real
    server: about a minute); ``watch_timeout`` ends watches that asked for no timeoutSeconds (the
    real server picks 30-60 minutes).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, store: Store | None = None,
                 faults: FaultPlan | None = None, history: int = 10_000, bookmark_interval: float = 5.0,
                 watch_timeout: float = 1800.0, version: Mapping[str, str] = VERSION_INFO) -> None:
        self.store = store or Store(history=history)
        self.faults = faults or FaultPlan()
        self.logs = LogBook()
        self.log_provider: LogProvider = self._default_logs
        self.proxy_provider: ProxyProvider = _nothing_listens
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.version = dict(version)
        self._host, self._port = host, port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._requests = 0
        #: Called, in the handling thread, for every request (see :data:`RequestObserver`).
        self.request_observers: list[RequestObserver] = []

    # Lifecycle -----------------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        self._listen()
        return self

    def _listen(self) -> None:
        self._httpd = _HTTPServer((self._host, self._port), self)
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-apiserver-{self._port}", daemon=True)
        self._thread.start()

    def _unlisten(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def stop(self) -> None:
        """Stop listening, end every watch and close every connection."""
        self._unlisten()
        self.store.close()
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _track(self, conn: socket.socket, opened: bool) -> None:
        with self._conn_lock:
            if opened:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _count(self) -> None:
        with self._conn_lock:
            self._requests += 1

    @property
    def requests_served(self) -> int:
        """Requests received since start (benchmarks divide this by time)."""
        return self._requests

    # Addresses -----------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def write_kubeconfig(self, path: str | Path, *, context: str = "gpuconf-sim",
                         namespace: str | None = None) -> Path:
        """Write a kubeconfig for this server (plain http, no credentials: kubectl accepts both)."""
        ctx: dict[str, Any] = {"cluster": context, "user": context}
        if namespace:
            ctx["namespace"] = namespace
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {}}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context,
        }
        target = Path(path)
        # whole or not at all: whoever waits for the file to appear (a script, a test) reads it complete
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(yaml.safe_dump(config, sort_keys=False))
        partial.replace(target)
        return target

    # Faults and providers --------------------------------------------------------------------------

    def set_outage(self, on: bool) -> None:
        """Total outage: every request on an open connection is dropped and new connections are refused.

        Ending the outage listens again on the same port.
        """
        self.faults.outage = on
        if on:
            self._unlisten()
        elif self._httpd is None:
            self._listen()

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        self.set_outage(True)
        try:
            yield
        finally:
            self.set_outage(False)

    def set_proxy_provider(self, provider: ProxyProvider | None) -> None:
        """Answer ``pods/proxy`` GETs from ``provider`` (the simulated exporters); None restores the
        default, where nothing listens in any pod (503)."""
        self.proxy_provider = provider or _nothing_listens

    def set_log_provider(self, provider: LogProvider | None) -> None:
        """Serve ``pods/log`` from ``provider`` (a node agent); None restores the default:
        :attr:`logs`, then the pod's kubelet endpoint."""
        self.log_provider = provider or self._default_logs

    def _default_logs(self, request: LogRequest) -> str:
        """What a real API server does: texts recorded here first (tests), otherwise fetch the
        logs from the kubelet of the pod's node, at the node's InternalIP and
        ``status.daemonEndpoints.kubeletEndpoint.Port``, over HTTPS without verifying the
        kubelet's certificate (kube-apiserver without --kubelet-certificate-authority)."""
        recorded = self.logs.recorded(request)
        if recorded is not None:
            return recorded
        endpoint = self._kubelet_endpoint(request.pod)
        if endpoint is None:
            return self.logs(request)
        return _fetch_kubelet_log(endpoint, request)

    def _kubelet_endpoint(self, pod: Mapping[str, Any]) -> str | None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return None
        try:
            node = self.store.get("nodes", str(node_name), copy=False)
        except ApiError:
            return None
        status = node.get("status") or {}
        port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 0
        address = next((a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), None)
        if not port or not address:
            return None
        host = f"[{address}]" if ":" in str(address) else str(address)
        return f"https://{host}:{port}"

    # Routing -------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: Mapping[str, str]) -> _Route:
        table = self.store.table
        parts = [p for p in path.split("/") if p]
        if method != "GET" and (not parts or parts[0] not in ("api", "apis")):
            raise _method_not_allowed()
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return _Route(RequestInfo("get", path), text="ok")
        if parts == ["version"]:
            return _Route(RequestInfo("get", path), document=lambda: self.version)
        if parts == ["api"]:
            return _Route(RequestInfo("get", path), document=lambda: table.api_versions(f"{self._host}:{self._port}"))
        if parts == ["apis"]:
            return _Route(RequestInfo("get", path), document=table.api_group_list)
        if parts[:2] == ["openapi", "v3"] and method == "GET":
            return self._route_openapi(path, parts[2:])
        if len(parts) == 2 and parts[0] == "apis" and method == "GET":
            group_doc = table.api_group(parts[1])
            if group_doc is None:
                raise _not_found()
            return _Route(RequestInfo("get", path, group=parts[1]), document=lambda: group_doc)
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _not_found()
        if not rest:
            doc = table.api_resource_list(group, version)
            if doc is None or method != "GET":
                raise _not_found() if doc is None else _method_not_allowed()
            return _Route(RequestInfo("get", path, group=group), document=lambda: doc)
        return self._route_resource(method, path, query, group, version, rest)

    def _route_openapi(self, path: str, rest: list[str]) -> _Route:
        """Just enough OpenAPI v3 for kubectl to see that PATCH takes ``fieldValidation``.

        kubectl apply validates manifests either on the server (when the OpenAPI v3 document lists
        the fieldValidation parameter) or on the client (from the full OpenAPI v2 schema, which this
        server does not have). Announcing the parameter lets plain ``kubectl apply -f`` work; the
        server accepts it and, unlike a real one, does not reject unknown fields.
        """
        table = self.store.table
        if not rest:
            index = {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash=sim"} for gv in _openapi_group_versions(table)}
            return _Route(RequestInfo("get", path), document=lambda: {"paths": index})
        gv = "/".join(rest)
        if gv not in _openapi_group_versions(table):
            raise _not_found()
        return _Route(RequestInfo("get", path), document=lambda: _openapi_document(table, gv))

    def _route_resource(self, method: str, path: str, query: Mapping[str, str], group: str, version: str,
                        rest: list[str]) -> _Route:
        table = self.store.table
        watch = False
        if rest[0] == "watch":  # the deprecated /watch/ path prefix
            watch, rest = True, rest[1:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = table.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if len(rest) >= 3 and rest[0] == "pods" and rest[2] == "proxy" and namespace and not watch:
            return self._route_pod_proxy(method, path, namespace, rest)
        if not rest or len(rest) > 3:
            raise _not_found()
        rt = table.lookup(group, version, rest[0])
        if rt is None:
            raise _not_found()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if rt.namespaced and name and not namespace:
            raise _not_found()
        if sub and not (sub == "status" and rt.has_status) and sub not in rt.subresources:
            raise _not_found()
        watch = watch or _flag(query, "watch")
        verb = {
            ("GET", True): "watch" if watch else "get",
            ("GET", False): "watch" if watch else "list",
            ("POST", False): "create",
            ("POST", True): "create" if sub == "binding" else "",
            ("PUT", True): "update",
            ("PATCH", True): "patch",
            ("DELETE", True): "delete",
            ("DELETE", False): "deletecollection",
        }.get((method, bool(name)), "")
        allowed = {"": None, "status": ("get", "update", "patch"), "log": ("get",), "binding": ("create",)}[sub]
        if not verb or (allowed is not None and verb not in allowed):
            raise _method_not_allowed()
        info = RequestInfo(verb, path, group=group, resource=rt.plural, subresource=sub, namespace=namespace,
                           name=name)
        return _Route(info, rt=rt)

    def _route_pod_proxy(self, method: str, path: str, namespace: str, rest: list[str]) -> _Route:
        """``pods/{name}[:{port}]/proxy[/{path}]``: RBAC sees verb get on pods/proxy (GET only here)."""
        if method != "GET":
            raise _method_not_allowed()
        name, _, port = urllib.parse.unquote(rest[1]).partition(":")
        rt = self.store.table.lookup("", "v1", "pods")
        info = RequestInfo("get", path, group="", resource="pods", subresource="proxy", namespace=namespace,
                           name=name)
        return _Route(info, rt=rt, proxy=(port, "/".join(urllib.parse.unquote(p) for p in rest[3:])))
