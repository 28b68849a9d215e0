"""Probe outputs: their schemas (one place, versioned) and strict parsers.

- ``cuda``: gpuconf's cuda-probe JSON (``probes/cuda-probe``).
- ``nccl``: gpuconf's nccl-probe JSON (``probes/nccl-probe``).
- ``nvidia_smi``: ``nvidia-smi`` table, ``-L`` and ``--query-gpu`` CSV output.
- ``nccl_tests``: nccl-tests' ``all_reduce_perf`` text output.

Every parser raises ``ProbeParseError`` on truncated, garbled or foreign output.
"""

from gpuconf.probes.errors import ProbeParseError

__all__ = ["ProbeParseError"]
