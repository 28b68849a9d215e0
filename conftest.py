"""Root conftest: makes `pytest suites/` and `pytest tests/` work from the repository root.

The gpuconf pytest plugin (cluster options, probe campaigns, reports) is registered here once
it exists; until then this file only marks the rootdir.
"""
