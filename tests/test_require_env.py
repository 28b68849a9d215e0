"""The hook's step from container environment to requirement list, and the per-device loop."""

from __future__ import annotations

import pytest

from gpuconf.compat.require import (
    MAX_REQUIREMENTS,
    EnvError,
    Gpu,
    HostFacts,
    check,
    check_container,
    legacy_cuda_requirement,
    parse_env,
)

FACTS = HostFacts(cuda="12.2", driver="535.104.05", gpus=(Gpu("8.6", "GeForce"),))


@pytest.mark.parametrize("spelling,disabled", [
    ("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
    ("yes", False), ("on", False), (" true", False), ("", False), ("tRUE", False), ("0", False), ("false", False),
])
def test_nvidia_disable_require_accepts_only_go_true_spellings(spelling, disabled):
    env = parse_env(["NVIDIA_REQUIRE_CUDA=cuda>=99", f"NVIDIA_DISABLE_REQUIRE={spelling}"])
    assert env.disabled is disabled
    assert env.requirements == (() if disabled else ("cuda>=99",))


def test_every_nvidia_require_variable_counts_except_jetpack_and_the_prefix_is_case_sensitive():
    env = parse_env(["NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_ARCH=arch>=8.0",
                     "NVIDIA_REQUIRE_JETPACK=csv-mounts=all", "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS=x",
                     "nvidia_require_foo=cuda>=99", "NVIDIA_REQUIRE_EMPTY="])
    assert env.requirements == ("cuda>=12.0", "arch>=8.0", "")


def test_a_later_duplicate_overrides_an_earlier_one():
    assert parse_env(["NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_REQUIRE_CUDA=cuda>=1"]).requirements == ("cuda>=1",)


def test_an_env_entry_without_equals_fails_the_hook():
    result = check_container(FACTS, env=["NVIDIA_REQUIRE_CUDA"])
    assert (result.ok, result.stage) == (False, "hook")
    assert result.error == "invalid environment variable: NVIDIA_REQUIRE_CUDA"


@pytest.mark.parametrize("cuda_version,requirement", [
    ("12.4.1", "cuda>=12.4"), ("10.0.130", "cuda>=10.0"), ("12", "cuda>=12.0"), ("v11.8", "cuda>=11.8"),
    ("12.4.1-rc1", "cuda>=12.4"), ("12.4.1+build.5", "cuda>=12.4"), ("0.1", "cuda>=0.1"),
])
def test_legacy_cuda_version_becomes_a_major_minor_requirement(cuda_version, requirement):
    assert legacy_cuda_requirement(cuda_version) == requirement


@pytest.mark.parametrize("cuda_version", ["abc", "12.4.1.1", "10.01", "12.4-rc1", "vv12", " 12.4", "12.", "4294967296"])
def test_a_malformed_legacy_cuda_version_fails_the_hook(cuda_version):
    with pytest.raises(EnvError, match="failed to get requirements"):
        legacy_cuda_requirement(cuda_version)
    result = check_container(FACTS, env=[f"CUDA_VERSION={cuda_version}"])
    assert (result.ok, result.stage) == (False, "hook")


def test_the_legacy_fallback_applies_when_nvidia_require_cuda_is_empty_and_keeps_the_empty_one():
    env = parse_env(["CUDA_VERSION=12.4.1", "NVIDIA_REQUIRE_CUDA="])
    assert env.legacy and env.requirements == ("", "cuda>=12.4")


def test_disable_require_wins_over_a_malformed_legacy_version():
    assert check_container(FACTS, env=["CUDA_VERSION=abc", "NVIDIA_DISABLE_REQUIRE=1"]).ok


def test_more_than_32_requirements_is_an_input_error_even_if_all_hold():
    assert check(["cuda>=1"] * MAX_REQUIREMENTS, FACTS).ok
    result = check(["cuda>=1"] * (MAX_REQUIREMENTS + 1), FACTS)
    assert (result.ok, result.stage, result.message) == (
        False, "input", "nvidia-container-cli: input error: too many requirements")


def test_the_synthesized_legacy_requirement_counts_towards_the_limit():
    env = [f"NVIDIA_REQUIRE_X{i}=cuda>=1" for i in range(32)] + ["CUDA_VERSION=12.0"]
    assert check_container(FACTS, env=env).error == "too many requirements"


@pytest.mark.parametrize("visible,ok", [
    ("void", True), ("", True), (" , ", True), ("0,void", True),  # no GPU requested: no check at all
    ("none", True),  # no device: arch/brand hold, cuda>=12.2 holds
    ("all", False), ("GPU-1234", False), ("none,void", True), ("all,none", True),
])
def test_nvidia_visible_devices_gates_the_check(visible, ok):
    env = [f"NVIDIA_VISIBLE_DEVICES={visible}", "NVIDIA_REQUIRE_CUDA=cuda>=12.2,brand=tesla"]
    assert check_container(FACTS, env=env).ok is ok


def test_every_requirement_is_checked_on_each_full_gpu_before_any_mig_device():
    facts = HostFacts(cuda="12.2", driver="535.104.05",
                      gpus=(Gpu("9.0", "Nvidia", mig=True), Gpu("8.0", "Tesla")))
    # The MIG device (listed first) fails the first requirement, the full GPU the second:
    # the full GPU is evaluated first, so the second requirement is the one reported.
    result = check(["arch<9.0", "brand=nvidia"], facts)
    assert (result.error, result.gpu) == ("unsatisfied condition: brand=nvidia", 1)


def test_with_no_visible_device_each_requirement_is_evaluated_once_without_one():
    result = check(["arch>=99", "cuda>=12.4"], HostFacts(cuda="12.2", gpus=()))
    assert result.error.startswith("unsatisfied condition: cuda>=12.4") and result.gpu is None
