"""gpuconf.sim.realk8s without a control plane: where the binaries come from, and what it says when
they are missing (the tier's skip reason)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuconf.sim.realk8s import BIN_ENV, ETCD_ENV, RealK8sUnavailable, find_binaries, kubeconfig


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_without_the_variable_the_reason_names_it() -> None:
    with pytest.raises(RealK8sUnavailable, match=f"^{BIN_ENV} is not set"):
        find_binaries(env={})


def test_a_directory_missing_a_binary_is_named_with_what_it_lacks(tmp_path: Path) -> None:
    executable(tmp_path / "kube-apiserver")
    with pytest.raises(RealK8sUnavailable) as info:
        find_binaries(env={BIN_ENV: str(tmp_path)})
    assert str(info.value) == f"{BIN_ENV}={tmp_path}: no executable kube-scheduler, kube-controller-manager there"


def test_the_binaries_and_etcd_are_found_where_the_variables_say(tmp_path: Path) -> None:
    for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        executable(tmp_path / name)
    etcd = executable(tmp_path / "my-etcd")
    assert find_binaries(env={BIN_ENV: str(tmp_path), ETCD_ENV: str(etcd)}) == (tmp_path, etcd)
    with pytest.raises(RealK8sUnavailable, match="etcd not found"):
        find_binaries(env={BIN_ENV: str(tmp_path), ETCD_ENV: str(tmp_path / "absent")})


def test_a_token_kubeconfig_inlines_the_ca_and_names_the_namespace(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"PEM")
    doc = yaml.safe_load(yaml.safe_dump(kubeconfig("https://127.0.0.1:1", ca, token="t", user="u", namespace="n")))
    assert doc["users"] == [{"name": "u", "user": {"token": "t"}}]
    assert doc["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:1", "certificate-authority-data": "UEVN"}
    assert doc["contexts"][0]["context"] == {"cluster": "gpuconf-test", "user": "u", "namespace": "n"}
