"""The one error every probe-output parser raises."""

from __future__ import annotations


class ProbeParseError(ValueError):
    """Output that is truncated, garbled or not what the parser reads.

    The message says what was wrong and where (``source``: which output, ``line``: 1-based line
    number when the format is line-oriented), so a report can show it next to the raw excerpt.
    A parser never returns a partial result presented as whole: it raises this instead.
    """

    def __init__(self, message: str, *, source: str, line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")
