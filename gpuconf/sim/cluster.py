"""A whole simulated GPU cluster in one process: the fake API server, the control plane
(scheduler, claim and job controllers) and the node agents of every node of a profile.

``gpuconf sim serve`` runs one for kubectl and the suite; ``pytest suites/ --simulate PROFILE``
starts one for a run; tests use it as a context manager.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes import client

from gpuconf.sim.agent import NodeAgents
from gpuconf.sim.agent_model import kubelet_version
from gpuconf.sim.controllers import ControlPlane
from gpuconf.sim.exporter import ExporterProvider
from gpuconf.sim.faults import AGENT_USER_AGENT, FaultPlan
from gpuconf.sim.profile import Profile, SimCluster, expand, load_profile
from gpuconf.sim.server import VERSION_INFO, FakeApiServer

__all__ = ["SimulatedCluster"]


def version_info(profile: Profile) -> dict[str, str]:
    """What the simulated API server's ``/version`` answers: the profile's Kubernetes version
    (``kubernetes: "1.36"`` -> gitVersion v1.36.0), the rest as :data:`VERSION_INFO`."""
    git = kubelet_version(profile)
    major, minor = git.removeprefix("v").split(".")[:2]
    return {**VERSION_INFO, "major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "minCompatibilityMinor": str(max(int(minor) - 1, 0)), "gitVersion": git}


class SimulatedCluster:
    """Start with :meth:`start` (or ``with``); everything stops with :meth:`stop`."""

    def __init__(self, profile: Profile | str | Path, *, host: str = "127.0.0.1", port: int = 0,
                 faults: FaultPlan | None = None, speed: float | None = None) -> None:
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.cluster: SimCluster = expand(self.profile)
        self.server = FakeApiServer(host=host, port=port, faults=faults, version=version_info(self.profile))
        self._speed = speed
        self.control: ControlPlane | None = None
        self.agents: NodeAgents | None = None
        self.startup_s: float | None = None

    def api_client(self) -> client.ApiClient:
        """A client for the node agents, with their own User-Agent (API faults spare them)."""
        config = client.Configuration(host=self.server.url)
        api = client.ApiClient(config)
        api.user_agent = AGENT_USER_AGENT
        return api

    def start(self) -> SimulatedCluster:
        began = time.monotonic()
        self.server.start()
        try:
            self.control = ControlPlane(self.server.store).start()
            options: dict[str, Any] = {} if self._speed is None else {"speed": self._speed}
            self.agents = NodeAgents(self.cluster, self.api_client(), **options)
            self.agents.serve_logs(self.server)
            self.server.set_proxy_provider(ExporterProvider(self.cluster))  # the DCGM exporters' /metrics
            self.agents.confirm_deletions(self.server)  # graceful pod deletion waits for the kubelet
            self.agents.start()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def stop(self) -> None:
        if self.agents is not None:
            self.agents.stop()
            self.agents = None
        if self.control is not None:
            self.control.stop()
            self.control = None
        self.server.stop()

    def write_kubeconfig(self, path: str | Path) -> Path:
        out = Path(path)
        self.server.write_kubeconfig(out)
        return out

    @property
    def gpus(self) -> int:
        return sum(len(n.gpus) for n in self.cluster.nodes)

    def summary(self) -> str:
        return (f"simulated cluster {self.profile.name}: {len(self.cluster.nodes)} nodes, {self.gpus} GPUs, "
                f"API server {self.server.url}")

    def __enter__(self) -> SimulatedCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
