"""The only door to the Kubernetes API: connecting, discovery, inventory, run namespaces, campaigns.

Everything above this package (plugin, suites) sees our frozen dataclasses and our exceptions
(:mod:`gpuconf.cluster.errors`), never the client's models or ``ApiException``.
"""

from gpuconf.cluster.access import Cluster, ClusterSource, Discovery, RetryPolicy, cluster_source, connect
from gpuconf.cluster.campaign import RunContext, collect_leftovers, run_campaign
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
from gpuconf.cluster.inventory import GpuNode, Inventory, build_inventory, list_active_pods, load_inventory
from gpuconf.cluster.outcomes import ContainerOutcome, PodEvent, PodOutcome, PodTimings

__all__ = ["AdmissionDeniedError", "ApiCallError", "Cluster", "ClusterError", "ClusterSource", "ConflictError",
           "ContainerOutcome",
           "Discovery", "ForbiddenError", "GpuNode", "Inventory", "KubeconfigError", "NotFoundError", "OverloadedError",
           "PodEvent",
           "PodOutcome", "PodTimings", "RetryPolicy", "RunContext", "UnreachableError", "build_inventory",
           "cluster_source", "collect_leftovers", "connect", "list_active_pods", "load_inventory", "run_campaign"]
