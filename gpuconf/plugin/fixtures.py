"""The session fixtures the suites use: the cluster, its inventory, the whole-node probes (launched
once, read by many checks), the --expect profile, the exporters' scrapes; and the guard that makes
a ``needs_probe`` test NOT TESTED where no probe image can start on its node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuconf.cluster import Inventory, PodOutcome
from gpuconf.kit.probes import (
    DRA_GPU_CLASS,
    cuda_probe_pod,
    dra_whole_gpus,
    native_probe_cuda,
    probe_block,
    whole_node_claim_template,
    whole_node_request,
)
from gpuconf.kit.state import SESSION, ClusterHandle, inventory, run_context, session


@pytest.fixture(scope="session")
def gpu_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """The cluster under test for the whole session."""
    state = session(request.config)
    if state.handle is None:
        pytest.skip(state.skip_reason or "no cluster")
    yield state.handle


@pytest.fixture(scope="session")
def gpu_inventory(request: pytest.FixtureRequest, gpu_cluster: ClusterHandle) -> Inventory:
    inv = inventory(request.config)
    assert inv is not None
    return inv


@pytest.fixture(scope="session")
def whole_node_probes(request: pytest.FixtureRequest, gpu_inventory: Inventory) -> dict[str, PodOutcome]:
    """One cuda-probe per GPU node asking for every allocatable nvidia.com/gpu, launched together; on a
    node that publishes its GPUs through DRA only, one ResourceClaim for all of them (allocation mode
    All), so inventory, smoke, health and metrics cover DRA nodes too."""
    from gpuconf.cluster import run_campaign

    state = session(request.config)
    if state.probes:
        return state.probes
    ctx = run_context(request.config)
    pods = []
    template: str | None = None
    for node in gpu_inventory.gpu_nodes:
        count = whole_node_request(node)
        claims: dict[str, str] = {}
        if count < 1:
            if not dra_whole_gpus(node) or DRA_GPU_CLASS not in gpu_inventory.device_classes:
                continue
            template = template or whole_node_claim_template(ctx)
            claims = {"gpus": template}
        pods.append(cuda_probe_pod(request.config, name=f"inventory-{node.name}", check="inventory", node=node.name,
                                   gpu_count=count if not claims else 0, resource_claims=claims or None,
                                   cuda=native_probe_cuda(node.labels)))
    outcomes = run_campaign(ctx, pods, timeout=request.config.getoption("gpuconf_timeout"))
    state.probes = {o.node or name.removeprefix("inventory-"): o for name, o in outcomes.items()}
    return state.probes


@pytest.fixture(scope="session")
def expect_profile(request: pytest.FixtureRequest) -> Any:
    """The declared cluster profile given with --expect (gpuconf.expect.ExpectProfile), or None."""
    return request.config.stash[SESSION].expect


@pytest.fixture(scope="session")
def exporter_scrapes(gpu_cluster: ClusterHandle, gpu_inventory: Inventory) -> dict[str, Any]:
    """Every GPU node's DCGM exporter, found by one cluster-wide pod list and scraped once through
    the API server's pod proxy, all nodes at once: node name -> gpuconf.checks.metrics.ExporterScrape
    (per GPU UUID its labels and values, or the error / not-tested reason)."""
    from gpuconf.checks.metrics import exporter_scrape
    from gpuconf.cluster.metrics import scrape_nodes

    scrapes = scrape_nodes(gpu_cluster.cluster, [n.name for n in gpu_inventory.gpu_nodes])
    return {node: exporter_scrape(node, s.pod.ref if s.pod is not None else None, text=s.text, error=s.error,
                                  forbidden=s.forbidden) for node, s in scrapes.items()}


@pytest.fixture(autouse=True)
def _probe_can_start(request: pytest.FixtureRequest) -> None:
    """A test marked ``needs_probe`` judges probes launched on its node (``gpu_node``): where no probe
    image can start there (the whole-node probe's finding), it is NOT TESTED with that reason; the
    smoke check reports the cause once."""
    if request.node.get_closest_marker("needs_probe") is None:
        return
    callspec = getattr(request.node, "callspec", None)
    node = callspec.params.get("gpu_node") if callspec is not None else None
    if not node:
        return
    block = probe_block(request.getfixturevalue("whole_node_probes"), node)
    if block is not None:
        pytest.skip(block.reason)
