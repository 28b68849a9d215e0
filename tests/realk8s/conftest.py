"""The real-control-plane tier: etcd, kube-apiserver, kube-scheduler and kube-controller-manager
v1.36 on 127.0.0.1 (gpuconf.sim.realk8s), one for the tier's tests (package-scoped: stopped after
the last of them, on its own free ports and temporary directory), with ``gpuconf sim agents`` playing
the nodes.

The binaries come from ``GPUCONF_K8S_BIN`` (etcd from the PATH or ``GPUCONF_ETCD``); without them
every test here skips, saying so. Every test is marked ``realk8s`` (``-m 'not realk8s'`` leaves
the tier out); under ``--dist loadgroup`` the tests using the control plane stay on one worker, so one
control plane serves them (tests/conftest.py groups tests by the shared fixture they use)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpuconf.sim.realk8s import RealControlPlane, RealK8sUnavailable, find_binaries
from realk8s.support import RealCluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realk8s)


@pytest.fixture(scope="package")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    try:
        bin_dir, etcd = find_binaries()
    except RealK8sUnavailable as e:
        pytest.skip(f"real control plane tier: {e}")
    workdir = tmp_path_factory.mktemp("realk8s")
    with RealControlPlane(bin_dir, etcd, workdir=workdir / "cp", audit=True) as cp:
        (workdir / "startup.yaml").write_text(yaml.safe_dump({k: round(v, 2) for k, v in cp.timings.items()}))
        cluster = RealCluster(cp, workdir)
        try:
            yield cluster
        finally:
            cluster.close()


