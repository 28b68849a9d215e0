"""Run reports: a pure model of a run's results (model) and the files written from it (writers):
CTRF-compatible JSON, a Markdown summary for CI logs, a self-contained HTML sign-off page."""

from gpuconf.report.model import CheckResult, Coverage, RunRecord, UntestedNode, node_verdicts, worst
from gpuconf.report.writers import write_html, write_json, write_markdown, write_reports

__all__ = ["CheckResult", "Coverage", "RunRecord", "UntestedNode", "node_verdicts", "worst", "write_html", "write_json",
           "write_markdown", "write_reports"]
