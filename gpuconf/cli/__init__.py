"""The ``gpuconf`` command, one module per subcommand (``gpuconf.cli:main`` is the console script).

The face: ``main`` and ``build_parser`` (:mod:`gpuconf.cli.main`), and ``evaluate_case`` /
``result_json``, the ``require --jsonl`` engine the reference tests drive.
"""

from gpuconf.cli.main import CLI_PREFIX, build_parser, evaluate_case, main, result_json

__all__ = ["CLI_PREFIX", "build_parser", "evaluate_case", "main", "result_json"]
