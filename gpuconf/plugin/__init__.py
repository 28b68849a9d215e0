"""The gpuconf pytest plugin (loaded by the root conftest.py, or with ``-p gpuconf.plugin``).

Cluster options: ``--simulate PROFILE`` runs the very same suites against a simulated GPU cluster
started in-process for the run (torn down after it); ``--kubeconfig``/``--context`` point them at
a real one. The cluster is opened lazily, once per session, at collection (suites parametrize per
GPU node) and closed in ``pytest_unconfigure``; everything the run creates lives in one run
namespace, deleted at the end, on failure and on Ctrl-C. Without a cluster option, suites skip
with the reason. State lives in ``config.stash`` (style.md), never in globals.

One module per concern, as pytest's own ``_pytest/``. This face only names them in
``pytest_plugins``: pytest imports, registers and assertion-rewrites each. It defines no hook or
fixture (they would register twice). Suites import gpuconf.kit, never this package.
"""

from __future__ import annotations

import pytest

# The kit was part of this module and its asserts were rewritten as the plugin's: registered before
# the modules below import it.
pytest.register_assert_rewrite("gpuconf.kit")

pytest_plugins = [
    "gpuconf.plugin.options",
    "gpuconf.plugin.collection",
    "gpuconf.plugin.scope",
    "gpuconf.plugin.session",
    "gpuconf.plugin.guards",
    "gpuconf.plugin.reports",
    "gpuconf.plugin.signoff",
    "gpuconf.plugin.fixtures",
    "gpuconf.plugin.fleet",
    "gpuconf.plugin.terminal",
]
