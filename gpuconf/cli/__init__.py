"""The ``gpuconf`` command, one module per subcommand (``gpuconf.cli:main`` is the console script).

The face: ``main`` and ``build_parser`` (:mod:`gpuconf.cli.main`), and ``evaluate_case`` /
``result_json``, the ``require --jsonl`` engine the reference tests drive.
"""

from gpuconf.cli.main import build_parser, main
from gpuconf.cli.require import evaluate_case, result_json
from gpuconf.compat.require import CLI_PREFIX

__all__ = ["CLI_PREFIX", "build_parser", "evaluate_case", "main", "result_json"]
