"""Root conftest: loads the gpuconf pytest plugin, so `pytest suites/` (the conformance suites)
and `pytest tests/` (the project's own tests) both work from the repository root."""

pytest_plugins = ["gpuconf.plugin"]
