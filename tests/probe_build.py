"""What the probe tests share: an environment free of what steers a probe, and one build step."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

STEERING_PREFIXES = ("NVIDIA_", "CUDA_", "NCCL_", "GPUCONF_", "FAKE_")


def clean_env(**extra: Any) -> dict[Any, Any]:
    """This process's environment without what steers a probe (NVIDIA_*, CUDA_*, NCCL_*, GPUCONF_*,
    the fake libraries' FAKE_*, LD_LIBRARY_PATH), plus ``extra``."""
    env: dict[Any, Any] = {k: v for k, v in os.environ.items()
                           if not (k.startswith(STEERING_PREFIXES) or k == "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def build_probe(build_sh: Path, out: Path, env: dict[Any, Any]) -> subprocess.CompletedProcess[str]:
    """Run a probe's build.sh into ``out``; a failed build fails the test with the compiler's message."""
    proc = subprocess.run(["bash", str(build_sh), str(out)], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return proc
