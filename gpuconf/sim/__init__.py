"""The simulated GPU cluster: a fake Kubernetes API server now, node agents and controllers on top.

The API server half (docs/architecture.md, "The simulated cluster"):

* :class:`FakeApiServer` (:mod:`.server`): real HTTP for the official client and kubectl;
* :class:`Store` (:mod:`.store`): objects, resourceVersions, watch history, and the in-process
  seam for controllers (``subscribe``, ``watch``, ``get``/``list``/``create``/``update``/
  ``patch_status``/``delete``/``bind_pod``, ``set_pod_termination_hook``);
* :class:`FaultPlan` (:mod:`.faults`): 429s, 500s, dropped connections, cut watches, outages;
* :mod:`.resources`, :mod:`.selectors`, :mod:`.patch`: the resource table, selectors, patch types.
"""

from gpuconf.sim.faults import Fault, FaultMode, FaultPlan, FaultRule, RequestInfo
from gpuconf.sim.resources import ResourceTable, ResourceType
from gpuconf.sim.server import FakeApiServer, LogBook, LogProvider, LogRequest, LogUnavailable
from gpuconf.sim.store import (
    ApiError,
    DeleteResult,
    ObjectList,
    PodTerminationHook,
    Store,
    Subscription,
    Watcher,
    WatcherClosed,
    WatchEvent,
)

__all__ = [
    "ApiError",
    "DeleteResult",
    "FakeApiServer",
    "Fault",
    "FaultMode",
    "FaultPlan",
    "FaultRule",
    "LogBook",
    "LogProvider",
    "LogRequest",
    "LogUnavailable",
    "ObjectList",
    "PodTerminationHook",
    "RequestInfo",
    "ResourceTable",
    "ResourceType",
    "Store",
    "Subscription",
    "WatchEvent",
    "Watcher",
    "WatcherClosed",
]
