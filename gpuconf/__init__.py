"""gpuconf: a pytest-based conformance suite for GPU Kubernetes clusters."""

__version__ = "0.1.0"
