"""The gpuconf pytest plugin (loaded by the root conftest.py).

Today it carries the cluster connection the suites need: ``--simulate PROFILE`` runs the very
same suites against a simulated GPU cluster started in-process for the run (and torn down after
it), ``--kubeconfig``/``--context`` point them at a real one. Suites ask for the ``gpu_cluster``
fixture; with neither option they skip with the reason. The full plugin (campaigns, reports,
``--expect``) grows here with the core-suites issue.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

__all__ = ["ClusterHandle"]


@dataclass(frozen=True)
class ClusterHandle:
    """What a suite gets: an API client, the kubeconfig behind it, and where the answers come from."""

    api_client: client.ApiClient
    kubeconfig: Path | None
    provenance: str  # "simulated:<profile>" or "kubeconfig:<path>[@context]"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuconf", "gpuconf: GPU cluster conformance")
    group.addoption("--simulate", metavar="PROFILE", default=None,
                    help="run against a simulated GPU cluster started for this run (a shipped profile name, "
                    "see `gpuconf sim profiles`, or a profile YAML file)")
    group.addoption("--kubeconfig", metavar="PATH", default=None, help="kubeconfig of the cluster under test")
    group.addoption("--context", metavar="NAME", default=None, help="kubeconfig context to use")


def pytest_configure(config: pytest.Config) -> None:
    simulate = config.getoption("--simulate")
    if simulate and config.getoption("--kubeconfig"):
        raise pytest.UsageError("give either --simulate or --kubeconfig, not both")
    if simulate:
        from gpuconf.sim.profile import ProfileError, load_profile

        try:
            load_profile(simulate)  # fail at startup, with file:line:field, not in the first test
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from exc


@pytest.fixture(scope="session")
def gpu_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """The cluster under test for the whole session."""
    simulate = request.config.getoption("--simulate")
    kubeconfig = request.config.getoption("--kubeconfig")
    if simulate:
        from gpuconf.sim.cluster import SimulatedCluster

        with SimulatedCluster(simulate) as sim:
            path = sim.write_kubeconfig(tmp_path_factory.mktemp("sim") / "kubeconfig")
            yield ClusterHandle(sim.api_client(), path, f"simulated:{sim.profile.name}")
        return
    if kubeconfig:
        from kubernetes import config as kconfig

        context = request.config.getoption("--context")
        api = kconfig.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
        yield ClusterHandle(api, Path(kubeconfig), f"kubeconfig:{kubeconfig}" + (f"@{context}" if context else ""))
        return
    pytest.skip("no cluster to test: give --kubeconfig PATH or --simulate PROFILE")
