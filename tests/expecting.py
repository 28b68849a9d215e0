"""A declaration for tests that need one unhealthy GPU to FAIL its node (tests/test_reports.py,
tests/test_signoff.py, tests/test_report_diff.py): without a declared threshold one unhealthy GPU
of eight is DEGRADED (inventory.allocatable-matches-capacity)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def strict_expect(where: Path) -> Path:
    """healthy-h100's --expect file (examples/expect/) with no unhealthy GPU tolerated."""
    text = (ROOT / "examples" / "expect" / "healthy-h100.yaml").read_text()
    assert "      memory_mib: 81559\n" in text
    path = where / "strict-expect.yaml"
    path.write_text(text.replace("      memory_mib: 81559\n", "      memory_mib: 81559\n      unhealthy_max: 0\n"))
    return path
