"""The compatibility engine: pure functions on plain data, no Kubernetes, no I/O beyond loading
the tables under ``gpuconf/data``.

- ``versions``: driver and CUDA versions, compared the way NVIDIA compares them.
- ``require``: NVIDIA_REQUIRE_* exactly as libnvidia-container evaluates it.
- ``tables``: the knowledge tables (driver branches, toolkits, images, GPUs, errors).
- ``rules``: the three CUDA compatibility rules and outcome prediction.
"""
