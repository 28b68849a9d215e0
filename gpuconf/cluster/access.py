"""Connecting to a cluster, calling it with bounded retries, and discovering what it serves.

``connect()`` is the only place a kubeconfig is read; :class:`Cluster` is the only object that
holds an ``ApiClient``. Every call goes through :meth:`Cluster.call`, which retries what a live
API server does transiently (429 with its Retry-After, 5xx, a reset connection) until one
deadline, and turns every failure into one of :mod:`gpuconf.cluster.errors`.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client
from kubernetes import config as kconfig
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay

from gpuconf.cluster.errors import (
    AdmissionDeniedError,
    ApiCallError,
    ClusterError,
    ConflictError,
    ForbiddenError,
    KubeconfigError,
    NotFoundError,
    OverloadedError,
    UnreachableError,
)

__all__ = ["NO_CLUSTER", "Cluster", "ClusterSource", "Discovery", "RetryPolicy", "cluster_source", "connect",
           "make_discovery", "stream_lines", "wrap_error"]

T = TypeVar("T")

#: The DRA API versions the suite understands, newest first (resource.k8s.io/v1 is GA in 1.34).
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
#: Group-versions whose resource lists discovery reads (the rest only as served/not served).
_LOOKED_INTO = ("resource.k8s.io", "nvidia.com")


@dataclass(frozen=True)
class RetryPolicy:
    """How one API call is retried: never past ``deadline`` seconds from its first attempt."""

    deadline: float = 60.0
    initial_wait: float = 0.2
    max_wait: float = 10.0
    request_timeout: float = 30.0  # per attempt, so a black-holed connection cannot eat the deadline

    def __post_init__(self) -> None:
        if self.deadline <= 0 or self.initial_wait < 0 or self.max_wait < 0 or self.request_timeout <= 0:
            raise ValueError("retry policy: deadline and request_timeout must be positive, waits not negative")


# -------------------------------------------------------------------------------------------------
# Errors


def _status_message(exc: ApiException) -> str:
    """The server's own message (a Status object's ``message``, or a one-line plain-text body such as
    Priority and Fairness's 429 sends), else the HTTP reason."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    text = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body
    if body is None and isinstance(text, str) and text.strip() and "\n" not in text.strip() and len(text) <= 300:
        return text.strip()
    return str(exc.reason or "no message")


def _connection_detail(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "the host name does not resolve (DNS)"
    if isinstance(reason, urllib3.exceptions.SSLError):
        return f"TLS handshake failed ({reason})"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "connection refused" if "refused" in str(reason).lower() else f"cannot connect ({reason})"
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return "timed out"
    if isinstance(reason, (urllib3.exceptions.ProtocolError, ConnectionError)):
        return "connection reset"
    return str(reason)


#: The authorizer's wording (``User "x" cannot create resource "pods" in API group ""``); any other
#: 403 comes from an admission plugin.
_RBAC_DENIAL = re.compile(r"\bcannot [a-z]+ resource\b")


def wrap_error(exc: BaseException, what: str, host: str) -> ClusterError:
    """Our exception for a client exception raised while doing ``what`` (e.g. "list nodes")."""
    if isinstance(exc, ClusterError):
        return exc
    if isinstance(exc, ApiException):
        status, message = int(exc.status or 0), _status_message(exc)
        if status == 401:
            return ForbiddenError(f"unauthorized: {what}: the API server at {host} rejected the credentials "
                                  f"({message})", status=status, reason="Unauthorized")
        if status == 403 and not _RBAC_DENIAL.search(message):
            return AdmissionDeniedError(f"{what}: {message}", status=status, reason="Forbidden")
        if status == 403:
            return ForbiddenError(f"forbidden: {what}: {message} (RBAC: grant the suite's identity this verb)",
                                  status=status, reason="Forbidden")
        if status == 404:
            return NotFoundError(f"not found: {what}: {message}", status=status, reason="NotFound")
        if status == 409:
            return ConflictError(f"conflict: {what}: {message}", status=status, reason="Conflict")
        if status == 429:
            return OverloadedError(f"API server overloaded: {what}: HTTP 429: {message}", status=status,
                                   reason="TooManyRequests")
        return ApiCallError(f"{what}: HTTP {status}: {message}", status=status, reason=str(exc.reason or ""))
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError)):
        return UnreachableError(f"cannot reach the API server at {host}: {_connection_detail(exc)}")
    return ClusterError(f"{what}: {type(exc).__name__}: {exc}")


def stream_lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a watch response, as they arrive."""
    buffer = b""
    for chunk in response.stream(65536):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (line for line in lines if line.strip())
    if buffer.strip():
        yield buffer


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status == 429 or (exc.status is not None and 500 <= exc.status < 600 and exc.status != 501)
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        return isinstance(exc.reason, (urllib3.exceptions.ProtocolError, ConnectionResetError))
    return isinstance(exc, (urllib3.exceptions.ProtocolError, ConnectionResetError))


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds from a 429's Retry-After header (or the Status details), if the server said."""
    if not isinstance(exc, ApiException) or exc.status != 429:
        return None
    value = (exc.headers or {}).get("Retry-After")
    if value is None:
        try:
            value = json.loads(exc.body or "{}").get("details", {}).get("retryAfterSeconds")
        except (TypeError, ValueError, AttributeError):
            value = None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        said = _retry_after(state.outcome.exception() if state.outcome else None)
        backoff = min(policy.max_wait, policy.initial_wait * 2 ** (state.attempt_number - 1))
        wanted = said if said is not None else backoff
        left = policy.deadline - (time.monotonic() - state.start_time)
        return max(0.0, min(wanted, left))  # never sleep past the deadline

    return wait


# -------------------------------------------------------------------------------------------------
# Discovery


@dataclass(frozen=True)
class Discovery:
    """Which API groups and versions the cluster serves (and, for DRA and the GPU Operator, which
    resources). ``groups`` maps a group ("" for core) to its served versions, preferred first."""

    server_version: str
    groups: Mapping[str, tuple[str, ...]]
    resources: Mapping[str, frozenset[str]] = field(default_factory=dict)  # "group/version" -> plurals

    def serves(self, group_version: str) -> bool:
        group, _, version = group_version.rpartition("/")
        return version in self.groups.get(group, ())

    def serves_resource(self, group_version: str, plural: str) -> bool:
        return plural in self.resources.get(group_version, frozenset())

    @property
    def dra_version(self) -> str | None:
        """The newest resource.k8s.io version served with ResourceSlices, if any."""
        return next((v for v in DRA_VERSIONS if self.serves_resource(f"resource.k8s.io/{v}", "resourceslices")), None)

    @property
    def cluster_policy(self) -> bool:
        """Whether the GPU Operator's ClusterPolicy (nvidia.com/v1 clusterpolicies) is served."""
        return self.serves_resource("nvidia.com/v1", "clusterpolicies")

    @property
    def gpu_cluster(self) -> bool:
        """Whether the GPU Operator's GPUCluster (nvidia.com/v1alpha1 gpuclusters, the operator's
        DRA-first mode from v26.7: DRA driver, DCGM and the exporter, no device plugin, no GFD) is served."""
        return self.serves_resource("nvidia.com/v1alpha1", "gpuclusters")


def make_discovery(version: Mapping[str, Any], core: Mapping[str, Any], groups: Mapping[str, Any],
                   resource_lists: Mapping[str, Mapping[str, Any]]) -> Discovery:
    """Pure: a Discovery from /version, /api, /apis and some /apis/<group>/<version> documents."""
    served: dict[str, tuple[str, ...]] = {"": tuple(str(v) for v in core.get("versions") or ())}
    for group in groups.get("groups") or ():
        preferred = str((group.get("preferredVersion") or {}).get("version", ""))
        versions = [str(v.get("version")) for v in group.get("versions") or ()]
        served[str(group.get("name"))] = tuple(sorted(versions, key=lambda v: v != preferred))
    resources = {gv: frozenset(str(r.get("name")) for r in doc.get("resources") or () if "/" not in str(r.get("name")))
                 for gv, doc in resource_lists.items()}
    return Discovery(str(version.get("gitVersion", "")), served, resources)


# -------------------------------------------------------------------------------------------------
# The cluster


class Cluster:
    """An API client, the typed APIs the suite uses, and the retry policy every call goes through."""

    def __init__(self, api_client: client.ApiClient, *, source: str, retry: RetryPolicy | None = None) -> None:
        self.api_client = api_client
        self.source = source  # "kubeconfig:<path>[@context]", "in-cluster", "default kubeconfig"
        self.retry = retry or RetryPolicy()
        self.core = client.CoreV1Api(api_client)
        self.version_api = client.VersionApi(api_client)
        self.apis = client.ApisApi(api_client)
        self.node_api = client.NodeV1Api(api_client)
        self.scheduling = client.SchedulingV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.resource = client.ResourceV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` with retries until the policy's deadline; errors become ours.
        ``what`` ("list nodes") names the call in messages."""
        kwargs.setdefault("_request_timeout", self.retry.request_timeout)
        retrying = Retrying(stop=stop_after_delay(self.retry.deadline), wait=_wait(self.retry),
                            retry=retry_if_exception(_retryable), reraise=True)
        started = time.monotonic()
        try:
            return retrying(fn, *args, **kwargs)
        except Exception as e:
            error = wrap_error(e, what, self.host)
            attempts = retrying.statistics.get("attempt_number", 1)
            if attempts > 1 and not isinstance(e, ClusterError):
                error.args = (f"{error.message} (gave up after {attempts} attempts in "
                              f"{time.monotonic() - started:.1f} s)",)
            raise error from e

    def call_json(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Like :meth:`call`, but the answer is the server's JSON as a dict (no model objects:
        the pure layers read the same camelCase dicts the API serves)."""
        response = self.call(what, fn, *args, _preload_content=False, **kwargs)
        data = json.loads(response.data or b"{}")
        if not isinstance(data, dict):
            raise ClusterError(f"{what}: the API server answered something other than an object")
        return data

    def get_json(self, path: str) -> dict[str, Any]:
        """GET a path (discovery documents, custom resources) as JSON."""
        def get(*, _preload_content: bool, _request_timeout: float) -> Any:
            request = self.api_client.param_serialize("GET", path, header_params={"Accept": "application/json"},
                                                      auth_settings=["BearerToken"])
            response = self.api_client.call_api(*request, _request_timeout=_request_timeout)
            response.read()  # type: ignore[no-untyped-call]
            if not 200 <= response.status <= 299:
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            return response

        return self.call_json(f"get {path}", get)

    def discover(self) -> Discovery:
        """What the cluster serves: /version, /api, /apis, and the resource lists of the DRA and
        GPU Operator group-versions it has."""
        version = self.get_json("/version")
        core = self.get_json("/api")
        groups = self.get_json("/apis")
        lists: dict[str, dict[str, Any]] = {}
        for group in groups.get("groups") or ():
            if group.get("name") not in _LOOKED_INTO:
                continue
            for v in group.get("versions") or ():
                gv = str(v.get("groupVersion"))
                try:
                    lists[gv] = self.get_json(f"/apis/{gv}")
                except NotFoundError:  # a version removed between the two reads
                    continue
        return make_discovery(version, core, groups, lists)


# -------------------------------------------------------------------------------------------------
# Connecting


def _check_kubeconfig_file(path: Path, context: str | None) -> None:
    """The checks the client makes with unhelpful messages, made first with clear ones."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise KubeconfigError(f"kubeconfig {path}: no such file") from e
    except (OSError, UnicodeDecodeError) as e:
        raise KubeconfigError(f"kubeconfig {path}: cannot read it ({e.__class__.__name__}: {e})") from e
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise KubeconfigError(f"kubeconfig {path}: not YAML{where}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts"), list):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (no contexts list)")
    names = [str(c.get("name")) for c in doc["contexts"] if isinstance(c, dict)]
    wanted = context or doc.get("current-context")
    if not wanted:
        raise KubeconfigError(f"kubeconfig {path}: no current-context; give a context ({', '.join(names)})")
    if wanted not in names:
        raise KubeconfigError(f"kubeconfig {path}: unknown context {wanted!r} (it has: {', '.join(names) or 'none'})")


#: The token every pod's service account gets mounted (unless its spec opts out): with
#: KUBERNETES_SERVICE_HOST, what tells a process that it runs in a pod that may reach its cluster.
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
#: Where a cluster comes from when none is given: the line a command says when none does.
NO_CLUSTER = ("neither $KUBECONFIG nor ~/.kube/config names a kubeconfig, and this is not a pod with a service "
              "account token")


@dataclass(frozen=True)
class ClusterSource:
    """Where a cluster's credentials come from, as kubectl looks for them: ``provenance`` says which
    ("kubeconfig:<path>", "kubeconfig:$KUBECONFIG=<value>", "kubeconfig:~/.kube/config", "in-cluster");
    ``paths`` are the kubeconfig files (none for the in-cluster service account)."""

    provenance: str
    paths: tuple[Path, ...]
    given: bool  # named on the command line (--kubeconfig), not found in the environment


def cluster_source(kubeconfig: str | Path | None = None) -> ClusterSource | None:
    """``kubeconfig``, else $KUBECONFIG, else ~/.kube/config, else the pod's service account; None
    where there is none. $KUBECONFIG is taken as set, like kubectl: its files are merged by the
    client (first file wins per entry), and where none of them exists :func:`connect` says so, it
    does not fall back to ~/.kube/config (a job whose kubeconfig went missing must not test another
    cluster)."""
    env = os.environ.get("KUBECONFIG", "")
    home = Path("~/.kube/config")
    if kubeconfig is not None:
        return ClusterSource(f"kubeconfig:{kubeconfig}", (Path(kubeconfig).expanduser(),), given=True)
    if env.strip(os.pathsep):
        return ClusterSource(f"kubeconfig:$KUBECONFIG={env}",
                             tuple(Path(p).expanduser() for p in env.split(os.pathsep) if p), given=False)
    if home.expanduser().is_file():
        return ClusterSource(f"kubeconfig:{home}", (home.expanduser(),), given=False)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and SERVICE_ACCOUNT_TOKEN.is_file():
        return ClusterSource("in-cluster", (), given=False)
    return None


def _load(kubeconfig: str | Path | None, context: str | None) -> tuple[client.ApiClient, str]:
    found = cluster_source(kubeconfig)
    if found is None:
        raise KubeconfigError(f"no kubeconfig: give one (--kubeconfig); {NO_CLUSTER}")
    if not found.paths:
        configuration = client.Configuration()
        try:
            kconfig.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except kconfig.ConfigException as e:
            raise KubeconfigError(f"in-cluster config: {e}") from e
        return client.ApiClient(configuration), found.provenance
    paths, source = list(found.paths), found.provenance
    if len(paths) > 1 and not any(p.is_file() for p in paths):
        raise KubeconfigError(f"{source}: none of its files exists")
    if len(paths) == 1:
        _check_kubeconfig_file(paths[0], context)
    try:
        api_client = kconfig.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(str(p) for p in paths), context=context, persist_config=False)
    except Exception as e:  # ConfigException, yaml, missing cert files: all are the kubeconfig's fault
        raise KubeconfigError(f"{source}: not usable: {' '.join(str(e).split())}") from e
    return api_client, source + (f"@{context}" if context else "")


def connect(kubeconfig: str | Path | None = None, context: str | None = None, *,
            retry: RetryPolicy | None = None, check: bool = True) -> Cluster:
    """A :class:`Cluster` from ``kubeconfig`` (and ``context``), else $KUBECONFIG, ~/.kube/config,
    or the in-cluster service account. With ``check`` it proves the server answers and lets the
    suite list nodes, so an unreachable or forbidden cluster fails here, once, with a clear line."""
    api_client, source = _load(kubeconfig, context)
    cluster = Cluster(api_client, source=source, retry=retry)
    if check:
        try:
            cluster.get_json("/version")
            cluster.call_json("list nodes", cluster.core.list_node, limit=1)
        except ClusterError:
            cluster.close()
            raise
    return cluster
