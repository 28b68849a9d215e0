"""Our exceptions for everything that goes wrong between the suite and the Kubernetes API.

Each one carries a ``kind`` (a closed vocabulary the plugin maps to a skip, an error or an exit
status) and a one-line message a user can act on; the client's exception is kept as ``__cause__``.
"""

from __future__ import annotations

__all__ = ["EXIT_BAD_KUBECONFIG", "EXIT_FORBIDDEN", "EXIT_UNREACHABLE", "AdmissionDeniedError", "ApiCallError",
           "ClusterError", "ConflictError", "ForbiddenError", "KubeconfigError", "NotFoundError", "OverloadedError",
           "UnreachableError",
           "access_exit_status"]

#: The exit statuses of every gpuconf command that talks to a cluster, one per reason it cannot
#: (README: exit statuses): the kubeconfig cannot be used, the API server does not answer, the
#: credentials or RBAC refuse.
EXIT_BAD_KUBECONFIG = 10
EXIT_UNREACHABLE = 11
EXIT_FORBIDDEN = 12


class ClusterError(Exception):
    """Base of every error of :mod:`gpuconf.cluster`; ``str()`` is one line."""

    kind = "cluster"

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever the server said

    @property
    def message(self) -> str:
        return str(self.args[0])


class KubeconfigError(ClusterError):
    """The kubeconfig cannot be used: missing, unreadable, not YAML, not a kubeconfig, unknown context."""

    kind = "kubeconfig"


class UnreachableError(ClusterError):
    """The API server did not answer: connection refused, DNS, TLS, connection reset past the deadline."""

    kind = "unreachable"


class ApiCallError(ClusterError):
    """The API server answered with an error status (after retries, for the retryable ones)."""

    kind = "api"

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class ForbiddenError(ApiCallError):
    """401 or 403: the credentials are rejected or RBAC does not allow the call."""

    kind = "forbidden"


class AdmissionDeniedError(ApiCallError):
    """403 from an admission plugin, not from RBAC (``pods "x" is forbidden: pod rejected: RuntimeClass
    "nvidia" not found``, a PodSecurity violation, a quota): the cluster's answer about that object,
    which a check observes, rather than a missing permission that stops the run."""

    kind = "admission"


class OverloadedError(ApiCallError):
    """429 TooManyRequests until the call's deadline passed (``--api-deadline``): the API server's
    Priority and Fairness kept refusing the suite. What the call was for is not tested; it says
    nothing about any node."""

    kind = "overloaded"


class NotFoundError(ApiCallError):
    kind = "not-found"


class ConflictError(ApiCallError):
    """409: AlreadyExists or a stale resourceVersion."""

    kind = "conflict"


def access_exit_status(exc: BaseException) -> int | None:
    """The exit status for an error that stops all access to the cluster, or None for another one."""
    if isinstance(exc, KubeconfigError):
        return EXIT_BAD_KUBECONFIG
    if isinstance(exc, UnreachableError | OverloadedError):  # either way the API server does not serve the run
        return EXIT_UNREACHABLE
    if isinstance(exc, ForbiddenError):
        return EXIT_FORBIDDEN
    return None
