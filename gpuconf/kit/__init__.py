"""The suites' kit: what a suite imports to reach the session's cluster, launch probes, read the
whole-node probe and act on its checks' verdicts. It never imports the pytest plugin
(gpuconf.plugin), which fills the state read here and imports the kit in turn.

- gpuconf.kit.state: the session's state (``SESSION``), the cluster handle, the inventory, the run's context
- gpuconf.kit.probes: probe pods and the whole-node probe's requests and report
- gpuconf.kit.evidence: ``judge``, ``skip_not_tested`` (NOT TESTED with its kind) and the recorders of
  measured figures
"""

from __future__ import annotations

from gpuconf.kit.evidence import judge, probe_pod_metrics, record_metrics, record_series, require, skip_not_tested
from gpuconf.kit.probes import (
    blocked,
    claim_template,
    cuda_probe_pod,
    gpu_ask,
    native_probe_cuda,
    parsed_probe,
    probe_block,
    probe_report,
    rendezvous_group,
)
from gpuconf.kit.state import (
    DEFAULT_PROBE_CUDA,
    SESSION,
    ClusterHandle,
    Session,
    compat_cudas,
    inventory,
    node_views,
    run_context,
    session,
)

__all__ = ["blocked", "DEFAULT_PROBE_CUDA", "SESSION", "ClusterHandle", "Session", "claim_template", "compat_cudas",
           "cuda_probe_pod", "gpu_ask", "inventory", "judge", "native_probe_cuda", "node_views", "parsed_probe",
           "probe_block", "probe_pod_metrics", "probe_report", "record_metrics", "record_series", "rendezvous_group",
           "require", "run_context", "session", "skip_not_tested"]
